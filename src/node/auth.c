#include "node/auth.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/canonical.h"
#include "core/cursor.h"
#include "core/timefmt.h"

#define CACHE_SLOTS 4096 /* power of two; a direct-mapped cache: a collision just evicts */

typedef struct cache_entry {
    char hash[65];
    user_info user;
    int64_t expires_ns;
} cache_entry;

struct auth_cache {
    pthread_mutex_t lock;
    cache_entry slots[CACHE_SLOTS];
};

auth_cache *auth_cache_create(void)
{
    auth_cache *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

void auth_cache_free(auth_cache *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->lock);
    free(c);
}

void auth_cache_clear(auth_cache *c)
{
    pthread_mutex_lock(&c->lock);
    memset(c->slots, 0, sizeof c->slots);
    pthread_mutex_unlock(&c->lock);
}

void auth_new_key(bool test, char key[API_KEY_MAX], char hash_hex[65])
{
    uint8_t secret[32];
    if (RAND_bytes(secret, sizeof secret) != 1)
        abort(); /* no entropy, no keys */
    const char *prefix = test ? "sk_test_" : "sk_live_";
    size_t n = strlen(prefix);
    memcpy(key, prefix, n);
    base64url_encode(secret, sizeof secret, key + n, API_KEY_MAX - n);
    sha256_hex(key, strlen(key), hash_hex);
}

static size_t slot_of(const char *hash_hex)
{
    return strtoul((char[9]){hash_hex[0], hash_hex[1], hash_hex[2], hash_hex[3], hash_hex[4],
                             hash_hex[5], hash_hex[6], hash_hex[7], 0},
                   NULL, 16) &
           (CACHE_SLOTS - 1);
}

bool auth_verify(app *a, const char *api_key, user_info *out)
{
    size_t len = strlen(api_key);
    if (len < 8 || len >= API_KEY_MAX)
        return false;
    char hash[65];
    sha256_hex(api_key, len, hash);
    int64_t now = monotonic_ns();
    cache_entry *e = &a->auth->slots[slot_of(hash)];

    pthread_mutex_lock(&a->auth->lock);
    bool hit = e->expires_ns > now && CRYPTO_memcmp(e->hash, hash, 64) == 0;
    if (hit)
        *out = e->user;
    pthread_mutex_unlock(&a->auth->lock);
    if (hit)
        return true;

    /* A lookup that fails for a database reason leaves it noted on the thread
     * (db_thread_failure), so the pipeline answers 503 and never 401 for a key it could not
     * check. */
    db_conn *db = store_reader(a->store);
    if (!db)
        return false;
    /* Only active keys of enabled users: a revoked key, or any key of a user `payd user
     * disable` turned off, fails here, so on every node it fails once its cache entry has
     * expired (within --auth-cache-ttl). A test key belongs to the user's test twin
     * (docs/modes.md): the request sees the twin's rows, under the live user's limit, and is
     * refused when the live user is disabled. */
    db_stmt *st = db_query(db,
                           "SELECT k.user_id, k.key_hash, COALESCE(o.rate_limit, u.rate_limit), "
                           "k.id, u.mode, COALESCE(u.live_user_id, u.id) FROM api_keys k "
                           "JOIN users u ON u.id = k.user_id "
                           "LEFT JOIN users o ON o.id = u.live_user_id "
                           "WHERE k.key_hash = $1 AND k.status = 'active' "
                           "AND u.disabled_at IS NULL AND o.disabled_at IS NULL",
                           "s", hash);
    bool found = false;
    db_status rc = db_step(st);
    if (rc != DB_ROW && rc != DB_DONE)
        db_note_failure(rc == DB_TIMEOUT ? DB_FAILURE_TIMEOUT : DB_FAILURE_UNAVAILABLE);
    if (rc == DB_ROW && CRYPTO_memcmp(db_text(st, 1), hash, 64) == 0) {
        memset(out, 0, sizeof *out);
        out->id = (uint64_t)db_int(st, 0);
        out->key_id = (uint64_t)db_int(st, 3);
        out->test = db_text(st, 4) && !strcmp(db_text(st, 4), "test");
        out->owner = (uint64_t)db_int(st, 5);
        rate_spec rate;
        if (db_text(st, 2) && parse_rate(db_text(st, 2), &rate) == 0) {
            out->rate_count = rate.count;
            out->rate_period_ms = rate.period_ms;
        }
        found = true;
    }
    db_done(st);
    if (found && a->cfg.auth_cache_ttl_ms > 0) {
        pthread_mutex_lock(&a->auth->lock);
        memcpy(e->hash, hash, 65);
        e->user = *out;
        e->expires_ns = now + a->cfg.auth_cache_ttl_ms * 1000000;
        pthread_mutex_unlock(&a->auth->lock);
    }
    return found;
}

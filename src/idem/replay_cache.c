/* Completed keys' answers in memory (idem/replay_cache.h).
 *
 * A completed key's answer never changes while the key lives (§2), on this node or any other.
 * So a retry whose user, key, method, path and raw body bytes are those of a request that
 * replayed the answer before gets it again here, without parsing its body or reading the
 * database: the bytes being the same, so is its fingerprint. A retry whose bytes differ (other
 * spacing or key order, or another request) takes the full precheck, where its fingerprint
 * decides. An entry is used only until KEEP_MARGIN_US before the key expires, so a key swept and
 * claimed anew (here, or on a node whose clock runs ahead) is never answered from here. The table
 * is direct-mapped and bounded: a key takes its slot from whichever key had it. */
#include "idem/replay_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/canonical.h"
#include "core/idem_key.h"
#include "core/livemode.h"
#include "core/timefmt.h"
#include "node/app.h"
#include "node/metrics.h"

#define SLOTS          4096
#define LOCKS          64
#define KEEP_MARGIN_US (60LL * 1000000)

typedef struct cached_answer {
    uint64_t user;
    char *key; /* NULL: a free slot */
    uint8_t digest[32];
    int64_t until;
    int status;
    char *location, *body;
    size_t len;
    bool says_mode; /* body is marked with its user's mode already (docs/modes.md) */
} cached_answer;

static cached_answer slots[SLOTS];
static pthread_mutex_t locks[LOCKS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_locks(void)
{
    for (int i = 0; i < LOCKS; i++)
        pthread_mutex_init(&locks[i], NULL);
}

static unsigned slot_of(uint64_t user, const char *key)
{
    uint64_t h = 1469598103934665603ULL ^ user; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211ULL;
    return (unsigned)(h ^ (h >> 32)) % SLOTS;
}

/* The Content-Type goes in too: a retry that sends the same bytes as another type takes the
 * full path, which may refuse it. */
static void body_digest(request *req, const char *body, size_t len, uint8_t out[32])
{
    const char *type = request_header(req, "Content-Type");
    sha256_stream *st = sha256_begin();
    sha256_add(st, req->method, strlen(req->method) + 1);
    sha256_add(st, req->path, strlen(req->path) + 1);
    sha256_add(st, type ? type : "", type ? strlen(type) + 1 : 1);
    sha256_add(st, body, len);
    sha256_end(st, out);
}

bool replay_cache_answer(request *req, const char *body, size_t len)
{
    const char *header = request_header(req, "Idempotency-Key");
    char key[256];
    if (!header || idem_parse_key(header, key) != 0)
        return false;
    req->body_digest = arena_alloc(&req->arena, 32);
    body_digest(req, body ? body : "", body ? len : 0, req->body_digest);
    pthread_once(&once, init_locks);
    unsigned slot = slot_of(req->user.id, key);
    pthread_mutex_t *lock = &locks[slot % LOCKS];
    pthread_mutex_lock(lock);
    cached_answer *e = &slots[slot];
    bool hit = e->key && e->user == req->user.id && !strcmp(e->key, key) &&
               !memcmp(e->digest, req->body_digest, 32) && now_us() < e->until;
    if (hit) {
        reply_raw(req, e->status, e->body, e->len);
        req->resp_says_mode = e->says_mode;
        if (e->location)
            reply_header(req, "Location", e->location);
    }
    pthread_mutex_unlock(lock);
    if (hit) {
        reply_header(req, "Idempotent-Replayed", "true");
        metrics_count_replay(req->app->metrics);
    }
    return hit;
}

void replay_cache_keep(request *req, const char *key, int64_t expires_at, int status,
                       const char *location, const char *body)
{
    int64_t keep_until = expires_at - KEEP_MARGIN_US;
    if (!req->body_digest || keep_until <= now_us())
        return;
    pthread_once(&once, init_locks);
    unsigned slot = slot_of(req->user.id, key);
    pthread_mutex_t *lock = &locks[slot % LOCKS];
    /* A stored answer is kept without its mode and marked on its way out (docs/modes.md): an
     * entry holds it marked, once, with its user's mode, so its replays are not scanned again */
    size_t len = body ? strlen(body) : 0, marked_len = 0;
    char *marked = len ? json_mark_livemode(body, len, !req->user.test, &marked_len) : NULL;
    cached_answer fresh = {.user = req->user.id,
                           .key = strdup(key),
                           .until = keep_until,
                           .status = status,
                           .location = location ? strdup(location) : NULL,
                           .body = marked ? marked : strdup(body ? body : ""),
                           .len = marked ? marked_len : len,
                           .says_mode = marked != NULL};
    memcpy(fresh.digest, req->body_digest, 32);
    pthread_mutex_lock(lock);
    cached_answer old = slots[slot];
    slots[slot] = fresh;
    pthread_mutex_unlock(lock);
    free(old.key);
    free(old.location);
    free(old.body);
}

#ifndef PAYD_API_API_KEYS_H
#define PAYD_API_API_KEYS_H
/* API keys (§13): a user holds several, so a key can be rotated without downtime. A key is shown
 * once, when it is made; the database keeps its SHA-256 and its first characters (the prefix)
 * only. Revoking a key marks it revoked: auth accepts active keys only, so every node refuses it
 * once its auth cache entry expires (--auth-cache-ttl). Shared by the API and `payd key`. */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/jsonw.h"
#include "store/db.h"

/* The prefix kept and listed: "sk_test_" or "sk_live_" and 8 characters of the key (48 of its
 * 256 random bits). A key made before modes shows "sk_". */
#define API_KEY_PREFIX_LEN 16
/* user_id shown is the user the key belongs to (owner_id), never its test twin (docs/modes.md) */
#define API_KEY_COLUMNS                                                                            \
    "id, COALESCE(owner_id, user_id), name, prefix, status, created_at, revoked_at, mode"

typedef struct new_api_key {
    uint64_t id;
    uint64_t user;  /* the row's user_id: the user, or its test twin for a test key */
    uint64_t owner; /* the live user */
    bool test;
    const char *name; /* NULL: none */
    char key[64];     /* the key itself: shown once, never stored */
    char hash[65];    /* its SHA-256, hex */
    char prefix[API_KEY_PREFIX_LEN + 1];
    int64_t created_at; /* µs */
} new_api_key;

/* Makes a fresh key for user (its id and created_at are the caller's) into k: a test key
 * when test (user is then the owner's test twin, api_key_test_twin), else a live one. */
void api_key_generate(new_api_key *k, uint64_t id, uint64_t user, uint64_t owner, bool test,
                      const char *name, int64_t created_at);
/* The test twin of the live user `owner` (docs/modes.md): found, or made under new_id at `now`
 * when the user has none yet. DB_DONE with *twin set; DB_DONE with *twin 0 when owner is no
 * live user; else the failure. */
db_status api_key_test_twin(db_conn *db, uint64_t owner, uint64_t new_id, int64_t now,
                            uint64_t *twin);
/* INSERT … RETURNING API_KEY_COLUMNS of k (not yet stepped; the caller finishes it). */
db_stmt *api_key_insert(db_conn *db, const new_api_key *k);
/* Inserts k; DB_DONE on success. */
db_status api_key_store(db_conn *db, const new_api_key *k);
/* Revokes the user's key (user 0: whoever owns it) at `now`; revoking a revoked key changes
 * nothing. Then selects API_KEY_COLUMNS of that key: the caller steps the statement (no row:
 * no such key of that user) and finishes it with db_done. NULL on a database error. */
db_stmt *api_key_revoke(db_conn *db, uint64_t key_id, uint64_t user, int64_t now);
/* A row of API_KEY_COLUMNS as the API shows it: never the key or its hash. */
void write_api_key_row(db_stmt *st, jsonw *w);

#endif

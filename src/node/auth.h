#ifndef PAYD_NODE_AUTH_H
#define PAYD_NODE_AUTH_H
/* API keys: 256 random bits from the OS CSPRNG, shown once; only their SHA-256 is stored.
 * Verified keys are cached for --auth-cache-ttl. */
#include <stdbool.h>
#include <stdint.h>

#include "node/app.h"

#define API_KEY_MAX 64

typedef struct auth_cache auth_cache;

/* The user an API key belongs to, as a request carries it once authenticated. */
typedef struct user_info {
    uint64_t id;     /* whose rows the request sees: the user, or its test twin for a test key */
    uint64_t owner;  /* the user as payd's users know it: the live user, whatever the mode */
    bool test;       /* a test key (docs/modes.md): livemode false */
    uint64_t key_id; /* the API key this request was made with */
    int64_t rate_count, rate_period_ms; /* the user's own limit; 0 = the server default */
} user_info;

auth_cache *auth_cache_create(void);
void auth_cache_free(auth_cache *c);
/* Makes a new key of the mode ("sk_test_…" or "sk_live_…") and the hash to store. */
void auth_new_key(bool test, char key[API_KEY_MAX], char hash_hex[65]);
/* Looks the key up (cache first); fills out and returns true when it belongs to a user. */
bool auth_verify(app *a, const char *api_key, user_info *out);
/* Drops cached entries (after a user's limits change). */
void auth_cache_clear(auth_cache *c);

#endif

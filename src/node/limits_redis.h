#ifndef PAYD_NODE_LIMITS_REDIS_H
#define PAYD_NODE_LIMITS_REDIS_H
/* GCRA state shared by every node in Redis (--rate-limit-store redis://HOST:PORT): one atomic
 * Lua script per check reads the key's theoretical arrival time, decides against Redis's own
 * clock (so nodes need not agree on time) and writes the new one with an expiry.
 *
 * Fail-open: when Redis cannot be reached, rate_store_check returns false and the caller uses
 * its local limiter; one log line says so and one when Redis is back, the gauge
 * payd_rate_limit_store_up follows, and one caller at a time retries with backoff. */
#include <stdbool.h>

#include "core/gcra.h"

typedef struct rate_store rate_store;

/* url: redis://HOST:PORT. NULL with err on a malformed URL (nothing is connected yet). */
rate_store *rate_store_create(const char *url, char *err, size_t errlen);
void rate_store_free(rate_store *r);

/* True with *out filled when Redis decided; false when it could not be asked. Thread-safe:
 * each thread keeps its own connection. */
bool rate_store_check(rate_store *r, const char *key, const gcra_policy *p, gcra_decision *out);

/* 1 while Redis answers, 0 while the node limits locally. */
int rate_store_up(rate_store *r);

#endif

#ifndef PAYD_SERVER_LIMITS_H
#define PAYD_SERVER_LIMITS_H
/* Per-user (else per-address) GCRA rate limiting with the X-RateLimit-* and IETF RateLimit
 * headers (§11). Runs before the idempotency engine, so a 429 consumes no key. One of the
 * pipeline's admission steps; the limiter's state (local GCRA table, Redis) is the node's
 * (node/app.h, node/limits_redis.h). */
#include <stdbool.h>

#include "request/request.h"

bool rate_limit_or_reply(request *req);

#endif

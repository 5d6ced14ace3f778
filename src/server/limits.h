#ifndef PAYD_SERVER_LIMITS_H
#define PAYD_SERVER_LIMITS_H
/* Per-user (else per-address) GCRA rate limiting with the X-RateLimit-* and IETF RateLimit
 * headers (§11). Runs before the idempotency engine, so a 429 consumes no key. One of the
 * pipeline's admission steps; the limiter's state (local GCRA table, Redis) is the node's
 * (node/app.h, node/limits_redis.h). */
#include <stdbool.h>

#include "request/request.h"

bool rate_limit_or_reply(request *req);

/* --max-in-progress-per-key: an authenticated request counts against its API key from
 * admission until it completes, so one key cannot hold the writer or every worker. False when
 * it has answered 429 too_many_requests_in_progress; the caller gives the place back with
 * in_progress_release once the request is over (either way). */
bool in_progress_or_reply(request *req);
void in_progress_release(request *req);

#endif

#ifndef PAYD_IDEM_REPLAY_CACHE_H
#define PAYD_IDEM_REPLAY_CACHE_H
/* Completed keys' answers in memory, for retries that repeat their request byte for byte. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "request/request.h"

/* Before the body is parsed: answers req (a replay) and returns true when a request of the same
 * user, key, method, path, Content-Type and raw body bytes replayed this answer before and the key
 * is still well within its life. Otherwise notes the body's digest for replay_cache_keep and
 * returns false: the full precheck decides. */
bool replay_cache_answer(request *req, const char *body, size_t len);

/* After the full precheck replayed key's answer to req: keeps it for retries until a margin
 * before expires_at (µs), the key's end. */
void replay_cache_keep(request *req, const char *key, int64_t expires_at, int status,
                       const char *location, const char *body);

#endif

#ifndef PAYD_IDEM_VERDICT_H
#define PAYD_IDEM_VERDICT_H
/* What a stored idempotency key means for a new request with the same key (§2): a pure
 * decision, from the stored row, the request's fingerprint, the time and two durations. */
#include <stdint.h>

typedef enum {
    KEY_ABSENT,    /* never claimed, or a finished key past its TTL: a new operation */
    KEY_REPLAY,    /* finished: replay the stored answer */
    KEY_MISMATCH,  /* claimed for another request */
    KEY_BUSY,      /* in flight and locked */
    KEY_RESUMABLE, /* in doubt, or its lock expired: a retry takes it over and resumes */
    KEY_RELEASED,  /* released (nothing stored): claimable again, same generation */
} key_verdict;

typedef struct stored_key {
    const char *state;       /* started, in_doubt, completed, released */
    const char *fingerprint; /* of the request that claimed it */
    int64_t claimed_at;      /* µs */
    int64_t locked_at;       /* µs; when a holder last took or renewed it */
} stored_key;

/* ttl_us: how long a key lives after its claim; lock_timeout_us: how long a started key's holder
 * is presumed alive. A released or expired key is judged before its fingerprint: reusing it for
 * another request is no conflict. */
key_verdict idem_judge(const stored_key *k, const char *fingerprint, int64_t now, int64_t ttl_us,
                       int64_t lock_timeout_us);

#endif

#ifndef PAYD_REQUEST_CLAIM_H
#define PAYD_REQUEST_CLAIM_H
/* The idempotency key a request holds (req->idem). The request layer owns the record, so a
 * request and whatever frees it need nothing above request/; the idempotency engine (idem/)
 * fills it when it claims the key, and handlers read its processor key. */
#include <stdbool.h>
#include <stdint.h>

typedef struct idem_claim {
    char key[256];
    char fingerprint[65];
    char *canonical_body; /* malloc'd; request_free frees it */
    int64_t claimed_at;   /* µs, this claim's (a takeover's is its own) */
    int64_t fence;        /* this holder's fencing token: every later write for the key names it */
    int64_t generation;   /* µs; fixed for the logical operation: kept by takeovers, resumes and
                           * re-claims after a release, new when an expired key is claimed anew */
    int processor_key_scheme; /* how processor_key is derived: PROCESSOR_KEY_* (idem/idem.h) */
    char processor_key[65];   /* the operation's key at the processor (derive_processor_key) */
    bool resumed;             /* a retry (or the recoverer) took over a key someone else held */
    bool claim_in_write;      /* not claimed yet: the handler's write job claims it first
                               * (ROUTE_CLAIM_IN_WRITE, or set by a route's prepare step for
                               * its request; commit_response_then) */
} idem_claim;

#endif

#ifndef PAYD_IDEM_IDEM_H
#define PAYD_IDEM_IDEM_H
/* The idempotency engine (§2): route middleware, independent of any resource.
 *
 *   precheck (HTTP thread, reads only) → claim (worker, one atomic write) → handler →
 *   finish (store, release or unlock the key, per the problem table)
 *
 * A handler's final write goes through commit_response(), which stores the response with the
 * key in the same transaction as the handler's own writes: a payment and its key's stored
 * answer are never one without the other. */
#include <stdbool.h>
#include <stdint.h>

#include "http/request.h"
#include "store/store.h"

typedef struct idem_claim {
    char key[256];
    char fingerprint[65];
    char *canonical_body;
    int64_t claimed_at; /* µs, this claim's (a takeover's is its own) */
    int64_t fence;      /* this holder's fencing token: every later write for the key names it */
    int64_t generation; /* µs; fixed for the logical operation: kept by takeovers, resumes and
                         * re-claims after a release, new when an expired key is claimed anew */
    char processor_key[65]; /* sha256(user, key, fingerprint, generation) */
    bool resumed;           /* a retry (or the recoverer) took over a key someone else held */
} idem_claim;

typedef enum {
    IDEM_NOT_USED,     /* the route does not use keys, or an optional key is absent */
    IDEM_ANSWERED,     /* replay, 409, 422 or a 400 was set as the response */
    IDEM_CLAIM_NEEDED, /* req->idem is set; the worker must call idem_claim_or_reply */
} idem_precheck_result;

idem_precheck_result idem_precheck(request *req);
/* Claims the key atomically. Returns true when this request now owns it. */
bool idem_claim_or_reply(request *req);
/* After the handler: stores, releases or unlocks the key as the response says. */
void idem_finish(request *req);

/* Runs fn as a write job; if the request owns a key, the job first checks (and locks) the key
 * under this holder's fencing token, and when fn returns 0 with a response set, that response
 * is stored with the key inside the same transaction. WRITE_FENCED: another holder has the key;
 * nothing was kept and the request's answer is already what the key holds (replay or 409). */
write_result commit_response(request *req, write_job_fn fn, void *ctx);

/* A charge this request made that its own record will never carry (it lost its key, or the
 * order went to another payment and the inline void failed): queued durably, so the recoverer
 * voids it by its processor key unless the key's current holder records that same charge.
 * Returns 0 once queued. */
int idem_queue_charge_void(request *req, uint64_t account_id, const char *charge_id,
                           int64_t amount);

/* The background recoverer and sweeper (runs every --recovery-interval). */
void idem_recovery_start(struct app *a);
void idem_recovery_stop(void);
/* One pass, for tests and for shutdown: sweeps expired keys, finishes keys left in doubt. */
void idem_recovery_pass(struct app *a);

#endif

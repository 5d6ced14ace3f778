#ifndef PAYD_IDEM_IDEM_H
#define PAYD_IDEM_IDEM_H
/* The idempotency engine (§2): route middleware, independent of any resource.
 *
 *   precheck (HTTP thread, reads only) → claim (one atomic write job, or inside the handler's
 *   own) → handler steps → finish (store, release or unlock the key, per the problem table)
 *
 * A handler's final write goes through commit_response_then(), which stores the response with the
 * key in the same transaction as the handler's own writes: a payment and its key's stored
 * answer are never one without the other. */
#include <stdbool.h>
#include <stdint.h>

#include "request/claim.h"
#include "request/request.h"
#include "request/route.h"
#include "request/step.h"
#include "store/store.h"

/* How a key's processor key is derived (idem.c, derive_processor_key), stored with the key
 * (idem_claim, request/claim.h). */
enum { PROCESSOR_KEY_HASHED = 1, PROCESSOR_KEY_TIME_ORDERED = 2 };
#define IDEM_PROCESSOR_KEY_MAX 65
/* The processor key of the operation a key names (§2): the same for every attempt of it. Also
 * for `payd ledger verify`, which tells a charge still in flight (its key open) from an orphan. */
void idem_processor_key(uint64_t user, const char *key, const char *fingerprint, int64_t generation,
                        int scheme, char out[IDEM_PROCESSOR_KEY_MAX]);

typedef enum {
    IDEM_NOT_USED,     /* the route does not use keys, or an optional key is absent */
    IDEM_ANSWERED,     /* replay, 409, 422 or a 400 was set as the response */
    IDEM_CLAIM_NEEDED, /* req->idem is set; idem_claim_then claims it */
} idem_precheck_result;

idem_precheck_result idem_precheck(request *req);
/* Claims the key atomically (one write job), then runs next(req, next_ctx) when this request
 * owns it; otherwise answers (replay, 409, 422, 503). */
step_result idem_claim_then(request *req, request_step next, void *next_ctx);
/* Drops a precheck's key that will not be claimed (the request answered before its claim). */
void idem_forget(request *req);
/* After the handler: stores, releases or unlocks the key as the response says; a key still
 * waiting for the write job that was to claim it (answered before that job) is dropped. */
void idem_finish(request *req);

/* Queues fn as a write job and returns; if the request owns a key, the job first checks (and
 * locks) the key under this holder's fencing token, and when fn returns 0 with a response set,
 * that response is stored with the key inside the same transaction. next(req, next_ctx) runs
 * after the commit with req->write_result holding what it came to; WRITE_FENCED: another holder
 * has the key, nothing was kept and the request's answer is already what the key holds (replay
 * or 409). */
step_result commit_response_then(request *req, write_job_fn fn, void *ctx, request_step next,
                                 void *next_ctx);

/* A charge this request made that its own record will never carry (it lost its key, or the
 * order went to another payment and the inline void failed): queued durably, so the recoverer
 * voids it by its processor key unless the key's current holder records that same charge.
 * A write step; the request is done once the void is queued (or its write failed, logged). */
step_result idem_queue_charge_void_then(request *req, uint64_t account_id, const char *charge_id,
                                        int64_t amount);

/* What the recoverer takes from the layers above it, handed in at start-up by main.c (a
 * callback of an upper layer, typed here in request/'s and idem/'s terms only; see "Callbacks"
 * in docs/architecture.md): the route table a key's request is matched against, and the
 * pipeline's handler step that runs a route's recover step and settles the key (run_step,
 * server/pipeline.h). */
typedef struct idem_recovery_hooks {
    const route *routes;
    int route_count;
    void (*run_step)(request *req, route_handler step);
    /* the periodic work of a layer above that the recoverer runs after each pass (the expiry
     * of holds past capture_before, docs/api.md §17); NULL: none */
    int (*periodic)(struct app *a);
} idem_recovery_hooks;

/* The background recoverer (runs every --recovery-interval; expired keys are store/prune.c's). */
void idem_recovery_start(struct app *a, const idem_recovery_hooks *hooks);
void idem_recovery_stop(void);
/* One pass, for tests and for shutdown: finishes keys left in doubt. */
void idem_recovery_pass(struct app *a, const idem_recovery_hooks *hooks);

#endif

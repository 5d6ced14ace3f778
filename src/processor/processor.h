#ifndef PAYD_PROCESSOR_PROCESSOR_H
#define PAYD_PROCESSOR_PROCESSOR_H
/* The card processor seen from payd: charge, find a charge, refund. Every call carries the
 * processor key derived from the Idempotency-Key's record, and the processor deduplicates on it,
 * so calling again after a lost answer moves money at most once. Calls block (they run on
 * worker threads, never on HTTP threads), except a charge started with processor_charge_start. */
#include <stdbool.h>
#include <stdint.h>

#include "node/app.h"

typedef enum proc_status {
    PROC_APPROVED,
    PROC_DECLINED,
    PROC_UNAVAILABLE, /* timeout, 5xx or unreachable: the outcome is unknown */
    PROC_NOT_FOUND,   /* find: the processor has no charge under that key */
} proc_status;

typedef struct proc_result {
    proc_status status;
    char id[48];           /* ch_…, rf_… or cp_… */
    char decline_code[48]; /* when declined (a capture or release beyond the hold: hold_exceeded) */
    bool authorized;       /* approved as a hold (processor_authorize): nothing captured yet */
} proc_result;

typedef struct processor processor;

/* spec: "builtin" (the simulator, on the server's own store) or "http://HOST:PORT". */
processor *processor_create(app *a, const char *spec, char *err, size_t errlen);
void processor_free(processor *p);
/* Whether p is the builtin simulator. */
bool processor_is_builtin(const processor *p);
/* The processor of a mode (docs/modes.md): test mode's is always the builtin simulator, live
 * mode's the one --processor names. */
processor *processor_of_mode(app *a, bool test);
/* Whether source is one of the builtin simulator's test tokens (docs/api.md, "Simulated
 * processor": tok_visa, tok_chargeDeclined, ...), which a live request may send only to the
 * builtin processor. */
bool processor_test_token(const char *source);

proc_result processor_charge(processor *p, const char *processor_key, int64_t amount,
                             const char *currency, const char *source);
/* Whether a charge would make its caller wait (an HTTP processor; a test token that answers
 * late). One that does not is started with processor_charge_start and holds no thread. */
bool processor_charge_blocks(const processor *p, const char *source);
/* Starts a charge that does not block (see above): done runs once it is made, on a store
 * writer's thread (builtin) or the HTTP processor's own thread, or at once (failure: what the
 * charge met in the database). done must not block. The strings must live until then. */
typedef void (*processor_charge_done)(proc_result r, db_failure failure, void *arg);
void processor_charge_start(processor *p, const char *processor_key, int64_t amount,
                            const char *currency, const char *source, processor_charge_done done,
                            void *arg);
/* A charge made inside the caller's write job, committed with what the job records (one commit
 * for the key's claim, the charge and the payment: docs/architecture.md, "One commit for a local
 * charge"). Only the builtin processor's, for a source that answers at once and as asked
 * (processor_charges_in_write). created: this call made it (false: one under the same processor
 * key was made before). processor_withdraw_in_write takes back a charge the same open job made;
 * processor_count_charge_in_write counts it once its job committed. */
bool processor_charges_in_write(const processor *p, const char *source);
write_result processor_charge_in_write(processor *p, db_conn *db, const char *processor_key,
                                       int64_t amount, const char *currency, const char *source,
                                       proc_result *out, bool *created);
write_result processor_withdraw_in_write(processor *p, db_conn *db, const char *processor_key);
void processor_count_charge_in_write(processor *p, proc_result r, bool created);
proc_result processor_find_charge(processor *p, const char *processor_key);
proc_result processor_refund(processor *p, const char *processor_key, const char *charge_id,
                             int64_t amount);
/* Starts a refund, on either processor: done runs as processor_charge_start's does. */
void processor_refund_start(processor *p, const char *processor_key, const char *charge_id,
                            int64_t amount, processor_charge_done done, void *arg);

/* ---- holds: authorize now, capture later (docs/api.md §17) ----
 * A charge made by processor_authorize is a hold: approved (with `authorized` set) and nothing
 * moves until it is captured. Each capture and each release is one operation under its own
 * processor key, deduplicated like a charge: calling again after a lost answer captures or
 * releases once. A capture of `amount` may also release `release` of the hold in the same call
 * (a final capture's rest), so that the calls of one hold add up whatever order they reach the
 * processor in. One that would take the hold past its amount is declined (hold_exceeded). All
 * of them block (worker threads only). */
proc_result processor_authorize(processor *p, const char *processor_key, int64_t amount,
                                const char *currency, const char *source);
proc_result processor_capture(processor *p, const char *processor_key, const char *charge_id,
                              int64_t amount, int64_t release);
proc_result processor_release(processor *p, const char *processor_key, const char *charge_id,
                              int64_t amount);

/* A hold's state as the processor holds it (`GET /charges/{id}`). */
typedef struct proc_hold {
    proc_status status; /* PROC_APPROVED: found; PROC_NOT_FOUND; PROC_UNAVAILABLE */
    int64_t amount, captured, released;
    bool authorized; /* made as a hold */
} proc_hold;
proc_hold processor_hold(processor *p, const char *charge_id);

#endif

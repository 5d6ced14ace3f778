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
    char id[48];           /* ch_… or rf_… */
    char decline_code[48]; /* when declined */
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
proc_result processor_find_charge(processor *p, const char *processor_key);
proc_result processor_refund(processor *p, const char *processor_key, const char *charge_id,
                             int64_t amount);
/* Starts a refund, on either processor: done runs as processor_charge_start's does. */
void processor_refund_start(processor *p, const char *processor_key, const char *charge_id,
                            int64_t amount, processor_charge_done done, void *arg);

#endif

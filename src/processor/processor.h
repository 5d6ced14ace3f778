#ifndef PAYD_PROCESSOR_PROCESSOR_H
#define PAYD_PROCESSOR_PROCESSOR_H
/* The card processor seen from payd: charge, find a charge, refund. Every call carries the
 * processor key derived from the Idempotency-Key's record, and the processor deduplicates on it,
 * so calling again after a lost answer moves money at most once. Calls block: they run on
 * worker threads, never on HTTP threads. */
#include <stdint.h>

#include "server/app.h"

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

proc_result processor_charge(processor *p, const char *processor_key, int64_t amount,
                             const char *currency, const char *source);
proc_result processor_find_charge(processor *p, const char *processor_key);
proc_result processor_refund(processor *p, const char *processor_key, const char *charge_id,
                             int64_t amount);

/* True for the tokens §5 accepts: tok_ followed by 1-64 of [A-Za-z0-9_]. */
int processor_valid_source(const char *source);

#endif

#ifndef PAYD_PROCESSOR_SIMULATOR_H
#define PAYD_PROCESSOR_SIMULATOR_H
/* The simulated processor of §5, on a store of its own tables (processor_charges,
 * processor_refunds): durable, so a charge made before a crash is found again after it.
 * Used in-process by `--processor builtin` and over HTTP by `payd processor-sim`. */
#include "processor/processor.h"
#include "store/store.h"

typedef struct sim_faults {
    int64_t latency_ms;
    double fail_before; /* probability of a 5xx without charging */
    double fail_after;  /* probability of charging, then losing the answer */
    unsigned seed;
} sim_faults;

proc_result sim_charge(store *s, const sim_faults *f, int64_t timeout_ms, const char *key,
                       int64_t amount, const char *currency, const char *source);
proc_result sim_find_charge(store *s, const char *key);
proc_result sim_refund(store *s, const sim_faults *f, const char *key, const char *charge_id,
                       int64_t amount);
/* {"charges": n, "refunds": n, "deduplicated": n} since start */
void sim_stats(int64_t *charges, int64_t *refunds, int64_t *deduplicated);

#endif

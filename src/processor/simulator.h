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
/* The same without blocking (the in-process processor, no injected faults): done runs once the
 * charge is durable, on the store writer's thread, or at once for a token that answers before
 * charging. The strings must live until then. Not for sources that make it wait
 * (sim_charge_blocks). */
typedef void (*sim_charge_done)(proc_result r, db_failure failure, void *arg);
void sim_charge_start(store *s, int64_t timeout_ms, const char *key, int64_t amount,
                      const char *currency, const char *source, sim_charge_done done, void *arg);
bool sim_charge_blocks(const char *source);
/* A charge made inside the caller's own write job (db: its connection), so that it commits with
 * what the caller records: for the tokens that answer at once and as asked (not tok_slow,
 * tok_lostResponse or tok_processorDown, sim_charge_in_write_ok). created: this call made it
 * (false: a charge under the same key was there before). Counted by sim_count_charge once the
 * job committed. */
bool sim_charge_in_write_ok(const char *source);
write_result sim_charge_in_write(db_conn *db, const char *key, int64_t amount, const char *currency,
                                 const char *source, proc_result *out, bool *created);
/* Takes back a charge sim_charge_in_write made in the same, still open, job: nothing outside it
 * saw the charge, so it is as if it was never made. */
write_result sim_withdraw_charge_in_write(db_conn *db, const char *key);
void sim_count_charge(bool created);
proc_result sim_find_charge(store *s, const char *key);
proc_result sim_refund(store *s, const sim_faults *f, const char *key, const char *charge_id,
                       int64_t amount);
/* The same without blocking (the in-process processor, no injected faults): done runs once the
 * refund is durable, on the store writer's thread. The strings must live until then. */
void sim_refund_start(store *s, const char *key, const char *charge_id, int64_t amount,
                      sim_charge_done done, void *arg);
/* sim_charge, or with hold an authorization only (docs/api.md §17): status 'authorized'. */
proc_result sim_charge_hold(store *s, const sim_faults *f, int64_t timeout_ms, const char *key,
                            int64_t amount, const char *currency, const char *source, bool hold);
/* A capture of amount (release: how much of the rest it releases too, -1 for all of it) or a
 * release (amount 0) of a hold, under its processor key: the same record again for the same
 * key. PROC_NOT_FOUND: no such hold; PROC_DECLINED (hold_exceeded): it would pass the hold. A
 * charge made with tok_lostResponse, and --fail-after, lose the answer of one just made. */
proc_result sim_hold_op(store *s, const sim_faults *f, const char *key, const char *charge_id,
                        int64_t amount, int64_t release);
bool sim_hold_op_exists(store *s, const char *key);
proc_hold sim_hold(store *s, const char *charge_id);
void sim_hold_stats(int64_t *captures, int64_t *releases);
/* {"charges": n, "refunds": n, "deduplicated": n} since start */
void sim_stats(int64_t *charges, int64_t *refunds, int64_t *deduplicated);

#endif

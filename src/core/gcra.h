/* GCRA rate limiting (§11): one timestamp per key, the theoretical arrival time (TAT), kept in a
 * lock-striped hash table whose idle keys are evicted so memory stays bounded. */
#ifndef PAYD_CORE_GCRA_H
#define PAYD_CORE_GCRA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t emission_interval_ns; /* one request's worth of time: period / count */
    int64_t burst;                /* requests allowed at once from a full quota */
} gcra_policy;

/* count and period_ms below 1 are taken as 1. burst <= 0 means one second's worth of the rate
 * (at least 1). */
gcra_policy gcra_policy_from_rate(int64_t count, int64_t period_ms, int64_t burst);

typedef struct {
    bool allowed;
    int64_t limit;          /* the burst quota */
    int64_t remaining;      /* requests still allowed right now (after this one) */
    int64_t reset_after_ns; /* until the quota is full again */
    int64_t retry_after_ns; /* when denied: until one request would be allowed; 0 when allowed */
} gcra_decision;

/* The pure step: tat is the key's theoretical arrival time (0 = new key); updated only when
 * allowed. now_ns must be >= 0 (a monotonic clock). */
gcra_decision gcra_apply(int64_t *tat, const gcra_policy *p, int64_t now_ns);

typedef struct gcra_table gcra_table;

/* stripes and max_keys_per_stripe must be >= 1; NULL on bad arguments or out of memory. The table
 * holds at most stripes * max_keys_per_stripe keys. */
gcra_table *gcra_table_create(size_t stripes, size_t max_keys_per_stripe);
void gcra_table_free(gcra_table *t);

/* Thread-safe. The key string is copied. */
gcra_decision gcra_check(gcra_table *t, const char *key, const gcra_policy *p, int64_t now_ns);

/* drop keys whose TAT <= now (their quota is full again, so forgetting them changes nothing);
 * returns how many */
size_t gcra_evict_idle(gcra_table *t, int64_t now_ns);

size_t gcra_size(gcra_table *t);

#endif

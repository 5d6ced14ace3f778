#ifndef PAYD_STORE_PRUNE_H
#define PAYD_STORE_PRUNE_H
/* Retention: rows past their time deleted in bounded chunks, the one place that does it, on a
 * thread of its own (the pruner).
 *
 * Each chunk is one write job of at most PRUNE_CHUNK_ROWS rows, found through an index that
 * leads with their age, so it costs the writer the same however large the tables are; a pause
 * follows each chunk, so the batches of requests queued meanwhile commit between two chunks
 * instead of waiting behind one long delete (docs/operations.md, "Retention"). A prune runs on
 * its caller's thread until nothing is left or *stop turns true. */
#include <stdatomic.h>
#include <stdint.h>

#include "store/store.h"

#define PRUNE_CHUNK_ROWS 500
#define PRUNE_PAUSE_MS   10

/* Finished and released idempotency keys claimed before expired_before (µs): lookups already
 * treat them as absent. Keys still open are never pruned: the recoverer settles them first.
 * Returns the keys deleted. */
int64_t store_prune_expired_keys(store *s, int64_t expired_before, const atomic_bool *stop);

/* Events created before `before` (µs), finished webhook deliveries that finished before it and
 * delivery attempts made before it (--event-retention). Returns the rows deleted. */
int64_t store_prune_events(store *s, int64_t before, const atomic_bool *stop);

/* The pruner: at start, then every interval_ms, the expired keys, then the old events. */
typedef struct prune_schedule {
    int64_t interval_ms;
    int64_t key_ttl_ms;         /* --idempotency-ttl */
    int64_t event_retention_ms; /* --event-retention */
} prune_schedule;
int store_pruner_start(store *s, const prune_schedule *schedule);
/* Stops it within one chunk. */
void store_pruner_stop(void);

#endif

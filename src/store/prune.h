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
#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

#define PRUNE_CHUNK_ROWS 500
#define PRUNE_PAUSE_MS   10

/* Finished and released idempotency keys claimed before expired_before (µs): lookups already
 * treat them as absent. Keys still open are never pruned: the recoverer settles them first.
 * Returns the keys deleted. */
int64_t store_prune_expired_keys(store *s, int64_t expired_before, const atomic_bool *stop);

/* Events created before `before` (µs), finished webhook deliveries that finished before it and
 * delivery attempts made before it (--event-retention). On PostgreSQL, every month partition of
 * events wholly older than `before` is dropped first (store_drop_event_partitions); the rest of
 * the events older than it are then deleted in chunks, unless whole_months
 * (--event-retention-whole-months), which leaves them to their month's drop. Returns the rows
 * deleted in chunks. */
int64_t store_prune_events(store *s, int64_t before, bool whole_months, const atomic_bool *stop);

/* PostgreSQL's month partitions of events and payments (docs/operations.md, "Partitions"), kept
 * by the pruner at every pass; nothing on SQLite. store_keep_partitions makes this month's and
 * the next PARTITION_MONTHS_AHEAD months' partitions where missing (the DEFAULT partition takes
 * any row whose month has none, and gives it up when its month's partition is made): how many
 * were made, -1 when it failed. store_drop_event_partitions drops every month partition of
 * events whose ids all lie before `before` (µs): how many, -1 when it failed. */
#define PARTITION_MONTHS_AHEAD 2
int store_keep_partitions(store *s);
int64_t store_drop_event_partitions(store *s, int64_t before);

/* The pruner: at start, then every interval_ms, the expired keys, then the old events. */
typedef struct prune_schedule {
    int64_t interval_ms;
    int64_t key_ttl_ms;                /* --idempotency-ttl */
    int64_t event_retention_ms;        /* --event-retention */
    bool event_retention_whole_months; /* --event-retention-whole-months (PostgreSQL) */
} prune_schedule;
int store_pruner_start(store *s, const prune_schedule *schedule);
/* Stops it within one chunk. */
void store_pruner_stop(void);

#endif

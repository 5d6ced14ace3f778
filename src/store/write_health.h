#ifndef PAYD_STORE_WRITE_HEALTH_H
#define PAYD_STORE_WRITE_HEALTH_H
/* Whether the database writes: what a write job the database failed tells its caller, and the
 * store's failing mark that /readyz reads (store_writes_failing). Internal to the store: the
 * writer calls these after each batch (docs/concurrency.md, "When writes fail"). */
#include <stdatomic.h>
#include <stdbool.h>

#include "store/store.h"

typedef struct write_health {
    /* the database failed a write and has not kept one WRITES_QUIET_NS or more after it */
    atomic_bool failing;
    atomic_llong last_failure_ns;
} write_health;

/* The database failure a job's caller answers with: a job the database failed (an error, a
 * failed commit; not a refusal nor a conflict) reaches it as an unavailable database, so every
 * route answers 503 with Retry-After (server/pipeline.c) and a claimed key stays for the retry. */
db_failure write_failure_for_caller(write_result r, db_failure met);
/* Whether a job's end says the database could not write (unavailable, or the store failed it:
 * a failed commit). */
bool write_failed_for_database(write_result r, bool store_failed, db_failure met);
/* After a batch: failing marks the store failing; kept (something committed) clears the mark
 * once WRITES_QUIET_NS have passed since the last failure. Logs each change once. */
void write_health_note(write_health *h, bool kept, bool failing);
bool write_health_failing(write_health *h);

/* The write an idle writer tries every second while the store is failing: it rewrites a row
 * start-up made (the cursor secret, main.c), unchanged, which the database still writes out. */
write_result write_probe(db_conn *db, void *ctx);

#endif

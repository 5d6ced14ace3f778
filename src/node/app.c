#include "node/app.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "node/lease.h"

bool app_ids_ready(app *a)
{
    return (!a->lease || lease_held(a->lease)) && id_generator_leased(&a->ids);
}

bool app_ready(app *a, const char **why)
{
    db_conn *db = store_reader(a->store);
    db_stmt *st = db ? db_query(db, "SELECT 1", "") : NULL;
    bool answers = st && db_step(st) == DB_ROW;
    db_done(st);
    bool writes = !store_writes_failing(a->store);
    bool held = !a->lease || lease_held(a->lease);
    bool leased = id_generator_leased(&a->ids);
    if (why)
        *why = !answers  ? (db_thread_failure() == DB_FAILURE_TIMEOUT
                                ? "no database connection came free in time"
                                : "the database cannot be reached")
               : !writes ? "the database's writes are failing (a full disk, an I/O error)"
               : !held   ? "this node does not hold its node id"
               : !leased ? "this node's node id lease lapsed: its renewal has not reached the "
                           "database in time"
                         : NULL;
    return answers && writes && held && leased;
}

bool app_answers_by_event(const app *a)
{
    return a->cfg.event_retention_ms >= a->cfg.idempotency_ttl_ms &&
           lease_fleet_reads_event_answers(a->lease);
}

bool app_orders_processor_keys(const app *a)
{
    return lease_fleet_knows_processor_key_schemes(a->lease);
}

bool app_try_next_id(app *a, uint64_t *id)
{
    /* A lapsed node-id lease (its renewal did not reach the database in time): no id, at once.
     * Waiting for the renewal here could park the store's writer (a payment's record runs where
     * its charge's commit ended) and every request queued behind it, with the database away
     * for good. The caller answers 503 and a claimed key stays in doubt for the retry. */
    int rc = id_next(&a->ids, id);
    if (rc == ID_LEASE_LAPSED)
        return false;
    if (rc != 0) {
        /* The clock went back further than --node-id's generator can absorb: issuing an id now
         * could repeat one. Refusing to run is the only safe answer. */
        log_msg("fatal", "clock moved backwards too far");
        abort();
    }
    return true;
}

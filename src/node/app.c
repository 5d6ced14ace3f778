#include "node/app.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/log.h"
#include "node/lease.h"

bool app_ids_ready(const app *a)
{
    return !a->lease || lease_held(a->lease);
}

bool app_ready(app *a, const char **why)
{
    db_conn *db = store_reader(a->store);
    db_stmt *st = db ? db_query(db, "SELECT 1", "") : NULL;
    bool answers = st && db_step(st) == DB_ROW;
    db_done(st);
    bool writes = !store_writes_failing(a->store);
    bool ids = app_ids_ready(a);
    if (why)
        *why = !answers  ? (db_thread_failure() == DB_FAILURE_TIMEOUT
                                ? "no database connection came free in time"
                                : "the database cannot be reached")
               : !writes ? "the database's writes are failing (a full disk, an I/O error)"
               : !ids    ? "this node does not hold its node id"
                         : NULL;
    return answers && writes && ids;
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

uint64_t app_next_id(app *a)
{
    uint64_t id;
    bool told = false;
    /* A lapsed node-id lease: wait for the renewal (the database is probably away, so the
     * request could not commit anyway). If another node took the id, the renewal ends the
     * process; ids are never issued under an id we may no longer hold. */
    while (!app_try_next_id(a, &id)) {
        if (!told)
            log_msg("error", "node id lease lapsed; waiting for its renewal before issuing ids");
        told = true;
        struct timespec pause = {0, 20 * 1000000L};
        nanosleep(&pause, NULL);
    }
    return id;
}

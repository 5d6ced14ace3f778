#include "store/write_health.h"

#include <time.h>

#include "core/log.h"
#include "store/store.h"

/* On a full disk a small commit can still fit where a failed one left room in SQLite's WAL:
 * writes count as succeeding again only after this long without a failure, so /readyz does not
 * flap between them. */
#define WRITES_QUIET_NS (3 * 1000000000LL)

static int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

db_failure write_failure_for_caller(write_result r, db_failure met)
{
    return r == WRITE_FAILED && met == DB_FAILURE_NONE ? DB_FAILURE_UNAVAILABLE : met;
}

bool write_failed_for_database(write_result r, bool store_failed, db_failure met)
{
    return met == DB_FAILURE_UNAVAILABLE ||
           (r == WRITE_FAILED && store_failed && met == DB_FAILURE_NONE);
}

void write_health_note(write_health *h, bool kept, bool failing)
{
    int64_t now = monotonic_ns();
    if (failing) {
        atomic_store(&h->last_failure_ns, now);
        if (!atomic_exchange(&h->failing, true))
            log_msg("error", "database writes are failing");
    } else if (kept && now - atomic_load(&h->last_failure_ns) >= WRITES_QUIET_NS &&
               atomic_exchange(&h->failing, false)) {
        log_msg("info", "database writes succeed again");
    }
}

bool write_health_failing(write_health *h)
{
    return atomic_load(&h->failing);
}

write_result write_probe(db_conn *db, void *ctx)
{
    (void)ctx;
    /* the fail code is a db_status: what comes back is one */
    return write_result_of_db((db_status)db_exec_checked(
        db, 1, DB_ERROR, "UPDATE secrets SET value = value WHERE name = $1", "s", "cursor"));
}

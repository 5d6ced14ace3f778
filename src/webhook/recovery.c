/* Redelivery, recovery and the streak of failures that disables an endpoint; see recovery.h. */
#include "webhook/recovery.h"

#include <stdlib.h>

#include "core/ids.h"
#include "core/log.h"
#include "core/timefmt.h"
#include "node/app.h"
#include "webhook/delivery.h"
#include "webhook/outbox.h"

#define WEBHOOK_ENDPOINT_DISABLED "webhook_endpoint.disabled"

db_status webhook_redeliver(db_conn *db, uint64_t endpoint, uint64_t event, int64_t now,
                            bool *queued)
{
    /* the SELECT's WHERE also keeps SQLite from reading ON CONFLICT as a join's ON; created_at
     * is the redelivery's time, so the oldest-undelivered metric counts from it */
    db_status rc =
        db_exec(db,
                "INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts, "
                "next_attempt_at, lease_until, lease_id, created_at) "
                "SELECT id, CAST($2 AS BIGINT), 'pending', 0, CAST($3 AS BIGINT), 0, 0, "
                "CAST($3 AS BIGINT) FROM webhook_endpoints WHERE id = $1 AND disabled = 0 "
                "ON CONFLICT (endpoint_id, event_id) DO UPDATE SET status = 'pending', "
                "next_attempt_at = excluded.next_attempt_at, lease_until = 0, lease_id = 0, "
                "created_at = excluded.created_at",
                "iii", (int64_t)endpoint, (int64_t)event, now);
    *queued = rc == DB_DONE && db_changes(db) > 0;
    if (*queued)
        webhook_events_recorded(0, 1); /* SQLite: the worker claims right after this commit */
    return rc;
}

db_status webhook_recover(db_conn *db, uint64_t endpoint, int64_t since, int64_t now,
                          int64_t *queued, int64_t *brought_forward)
{
    /* a failed delivery keeps the time it failed in next_attempt_at (the sweeper reads it too) */
    db_status rc = db_exec(db,
                           "UPDATE webhook_deliveries SET status = 'pending', "
                           "next_attempt_at = $3, lease_until = 0, lease_id = 0, created_at = $3 "
                           "WHERE endpoint_id = $1 AND status = 'failed' AND next_attempt_at >= $2",
                           "iii", (int64_t)endpoint, since, now);
    if (rc != DB_DONE)
        return rc;
    *queued = db_changes(db);
    /* still retrying: its next attempt now instead of later; one in flight keeps its lease and
     * is left to record its own result */
    rc = db_exec(db,
                 "UPDATE webhook_deliveries SET next_attempt_at = $2 "
                 "WHERE endpoint_id = $1 AND status = 'pending' AND attempts > 0 "
                 "AND next_attempt_at > $2 AND lease_until <= $2",
                 "ii", (int64_t)endpoint, now);
    if (rc != DB_DONE)
        return rc;
    *brought_forward = db_changes(db);
    if (*queued + *brought_forward > 0)
        webhook_events_recorded(0, 1);
    return DB_DONE;
}

static void log_disabled(uint64_t endpoint, int64_t failing_since)
{
    char id[ID_STR_MAX];
    id_format(endpoint, "we", id);
    jsonw w;
    log_begin(&w, "warn", "webhook endpoint disabled: every attempt failed for too long");
    jw_key(&w, "endpoint_id");
    jw_string(&w, id);
    char since[RFC3339_STR_MAX];
    format_rfc3339_ms(failing_since, since);
    jw_key(&w, "failing_since");
    jw_string(&w, since);
    log_end(&w);
}

/* Disables the endpoint and writes its event, when it is still enabled. No id ready for the
 * event: nothing now, the next failed attempt tries again (never one without the other). */
static db_status disable_endpoint(db_conn *db, app *a, uint64_t endpoint, int64_t failing_since,
                                  int64_t now)
{
    uint64_t event;
    if (!app_try_next_id(a, &event))
        return DB_DONE;
    db_stmt *st =
        db_query(db,
                 "UPDATE webhook_endpoints SET disabled = 1, updated_at = $2 "
                 "WHERE id = $1 AND disabled = 0 RETURNING " WEBHOOK_ENDPOINT_COLUMNS ", user_id",
                 "ii", (int64_t)endpoint, now);
    if (!st)
        return DB_ERROR;
    db_status rc = db_step(st);
    if (rc != DB_ROW) {
        db_done(st);
        return rc == DB_DONE ? DB_DONE : rc;
    }
    uint64_t user = (uint64_t)db_int(st, WEBHOOK_ENDPOINT_COLUMN_COUNT);
    jsonw w;
    jw_init(&w);
    webhook_endpoint_write(st, &w);
    db_done(st);
    char *object = jw_take(&w, NULL);
    rc = DB_DONE;
    if (a->cfg.events) /* off only to measure the outbox's cost */
        rc = webhook_event_insert(db, event, user, WEBHOOK_ENDPOINT_DISABLED, object,
                                  id_decode(event).unix_ms * 1000, a->cfg.max_webhook_fanout);
    free(object);
    if (rc == DB_DONE)
        log_disabled(endpoint, failing_since);
    return rc;
}

/* One endpoint's streak after the job's attempts: ended by a 2xx that came last, started over
 * by a 2xx followed by a failure, else started (or carried on) by the failures. */
static db_status write_streak(db_conn *db, app *a, uint64_t endpoint, bool delivered,
                              bool failed_last, int64_t now)
{
    if (!failed_last)
        return db_exec(db,
                       "UPDATE webhook_endpoints SET failing_since = NULL "
                       "WHERE id = $1 AND failing_since IS NOT NULL",
                       "i", (int64_t)endpoint);
    db_stmt *st = db_query(db,
                           "UPDATE webhook_endpoints SET failing_since = CASE WHEN $3 = 1 THEN $2 "
                           "ELSE COALESCE(failing_since, $2) END WHERE id = $1 "
                           "RETURNING failing_since, disabled",
                           "iii", (int64_t)endpoint, now, (int64_t)delivered);
    if (!st)
        return DB_ERROR;
    db_status rc = db_step(st);
    int64_t failing_since = rc == DB_ROW ? db_int(st, 0) : now;
    bool enabled = rc == DB_ROW && db_int(st, 1) == 0;
    db_done(st);
    if (rc != DB_ROW) /* the endpoint is gone */
        return rc == DB_DONE ? DB_DONE : rc;
    if (enabled && now - failing_since >= a->cfg.webhook_disable_after_ms * 1000)
        return disable_endpoint(db, a, endpoint, failing_since, now);
    return DB_DONE;
}

db_status webhook_streaks_write(db_conn *db, webhook_streaks *s)
{
    db_status rc = DB_DONE;
    for (int i = 0; i < s->count && rc == DB_DONE; i++)
        rc = write_streak(db, s->app, s->of[i].endpoint, s->of[i].delivered, s->of[i].failed_last,
                          s->now);
    s->count = 0;
    return rc;
}

db_status webhook_streak_add(db_conn *db, webhook_streaks *s, uint64_t endpoint, bool delivered)
{
    int i = 0;
    while (i < s->count && s->of[i].endpoint != endpoint)
        i++;
    if (i == s->count) {
        if (s->count == WEBHOOK_STREAKS_MAX) {
            db_status rc = webhook_streaks_write(db, s);
            if (rc != DB_DONE)
                return rc;
            i = 0;
        }
        s->of[i].endpoint = endpoint;
        s->of[i].delivered = false;
        s->of[i].failed_last = !delivered; /* noted newest first: this is its latest attempt */
        s->count = i + 1;
    }
    s->of[i].delivered |= delivered;
    return DB_DONE;
}

write_result webhook_release_own_leases(db_conn *db, void *arg)
{
    (void)arg;
    return write_result_of_db(
        db_exec(db, "UPDATE webhook_deliveries SET lease_until = 0 WHERE status = 'pending'", ""));
}

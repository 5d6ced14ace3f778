/* The outbox: events and their pending deliveries, written in the caller's transaction. */
#include "webhook/outbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "webhook/delivery.h"

db_status webhook_subscribers(db_conn *db, uint64_t user, const char *type, int64_t limit,
                              uint64_t **ids, int *count)
{
    *ids = NULL;
    *count = 0;
    /* in the page index's order: ORDER BY id alone would sort in a temporary b-tree, set up
     * for every event even when the user has no endpoint (12 % of the writer's time) */
    db_stmt *st = db_query(db,
                           "SELECT id FROM webhook_endpoints WHERE user_id = $1 AND disabled = 0 "
                           "AND " WEBHOOK_ENDPOINT_WANTS("$2") " ORDER BY created_at, id LIMIT $3",
                           "isi", (int64_t)user, type, limit);
    if (!st)
        return DB_ERROR;
    int cap = 0;
    db_status rc;
    while ((rc = db_step(st)) == DB_ROW) {
        if (*count == cap) {
            cap = cap ? cap * 2 : 4;
            *ids = realloc(*ids, (size_t)cap * sizeof **ids);
        }
        (*ids)[(*count)++] = (uint64_t)db_int(st, 0);
    }
    db_done(st);
    if (rc != DB_DONE) {
        free(*ids);
        *ids = NULL;
        *count = 0;
    }
    return rc;
}

/* One pending delivery per enabled endpoint of the user that wants the type, to at most
 * `fanout` of them (--max-webhook-fanout), the oldest first. Endpoints with the same url are not
 * merged: each signs with its own secret and keeps its own attempts, so each counts. */
static db_status queue_deliveries(db_conn *db, uint64_t user, uint64_t event, const char *type,
                                  int64_t created, int64_t fanout)
{
    if (db_kind_of(db) == DB_POSTGRES) {
        /* one statement that needs no answer, so it travels with the job's next one: a read
         * here would cost the payment a round trip. Other nodes' workers find deliveries by
         * polling, so this node's does too (within IDLE_POLL_MS) */
        db_status rc = db_exec_checked(
            db, -1, 0,
            "INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts, "
            "next_attempt_at, lease_until, lease_id, created_at) "
            "SELECT id, CAST($1 AS BIGINT), 'pending', 0, CAST($3 AS BIGINT), 0, 0, "
            "CAST($3 AS BIGINT) FROM webhook_endpoints "
            "WHERE user_id = $2 AND disabled = 0 AND " WEBHOOK_ENDPOINT_WANTS(
                "$4") " ORDER BY created_at, id LIMIT $5",
            "iiisi", (int64_t)event, (int64_t)user, created, type, fanout);
        if (rc == DB_DONE)
            webhook_events_recorded(1, 0);
        return rc;
    }
    /* SQLite: a read first, and an INSERT per endpoint found. Most users have none, and a plain
     * indexed read costs the single writer far less than an INSERT … SELECT that finds nothing */
    uint64_t *endpoints;
    int count;
    db_status rc = webhook_subscribers(db, user, type, fanout, &endpoints, &count);
    for (int i = 0; i < count && rc == DB_DONE; i++)
        rc = db_exec(db,
                     "INSERT INTO webhook_deliveries (endpoint_id, event_id, status, attempts, "
                     "next_attempt_at, lease_until, lease_id, created_at) "
                     "VALUES ($1, $2, 'pending', 0, $3, 0, 0, $3)",
                     "iii", (int64_t)endpoints[i], (int64_t)event, created);
    free(endpoints);
    if (rc == DB_DONE)
        webhook_events_recorded(1, count); /* wakes the worker only when something was queued */
    return rc;
}

db_status webhook_event_insert(db_conn *db, uint64_t id, uint64_t user, const char *type,
                               const char *data, int64_t created, int64_t fanout)
{
    db_status rc = db_exec_checked(db, -1, 0,
                                   "INSERT INTO events (id, user_id, type, data, created_at) "
                                   "VALUES ($1, $2, $3, $4, $5)",
                                   "iissi", (int64_t)id, (int64_t)user, type, data, created);
    if (rc != DB_DONE)
        return rc;
    return queue_deliveries(db, user, id, type, created, fanout);
}

/* The stored ",a,b," list as a JSON array. */
static void write_events_array(jsonw *w, const char *stored)
{
    jw_array_begin(w);
    const char *p = stored + (*stored == ',');
    while (*p) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (end > p) {
            char type[64];
            snprintf(type, sizeof type, "%.*s", (int)(end - p), p);
            jw_string(w, type);
        }
        p = *end ? end + 1 : end;
    }
    jw_array_end(w);
}

void webhook_endpoint_write(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "we", (uint64_t)db_int(st, 0));
    jw_member_object(w, "webhook_endpoint");
    jw_member_string(w, "url", db_text(st, 1));
    jw_key(w, "events");
    write_events_array(w, db_text(st, 2));
    jw_member_string(w, "description", db_text(st, 3));
    jw_key(w, "disabled");
    jw_bool(w, db_int(st, 4) != 0);
    jw_member_time(w, "created_at", db_int(st, 5));
    jw_member_time(w, "updated_at", db_int(st, 6));
    /* a rotation's previous secret signs until then (docs/webhooks.md, "Rotating a secret") */
    if (db_is_null(st, 7)) {
        jw_key(w, "previous_secret_expires_at");
        jw_null(w);
    } else {
        jw_member_time(w, "previous_secret_expires_at", db_int(st, 7));
    }
    jw_object_end(w);
}

/* Events (§15): recording in the change's own transaction, and the list and get endpoints. */
#include "api/events.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/common.h"
#include "api/enums.h"
#include "api/event_waiters.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/jsonw.h"
#include "core/timefmt.h"
#include "webhook/delivery.h"
#include "webhook/outbox.h"

db_status event_record(db_conn *db, request *req, const char *type, const char *object_json)
{
    if (!req->app->cfg.events) /* benchmarks only: the cost of the outbox itself */
        return DB_DONE;
    /* in a write job: an id only if one is ready now. Waiting out a lapsed lease here would
     * hold this batch's writer, and its row locks, from the renewal that ends the wait */
    uint64_t id;
    if (!app_try_next_id(req->app, &id)) {
        db_note_failure(DB_FAILURE_UNAVAILABLE);
        return DB_ERROR;
    }
    db_status rc = webhook_event_insert(db, id, req->user.id, type, object_json, created_at_of(id),
                                        req->app->cfg.max_webhook_fanout);
    if (rc == DB_DONE && object_json == req->resp_body)
        req->resp_event = id; /* the key's stored answer may name this event (idem.c) */
    if (rc == DB_DONE)        /* a long-poll waiting for it re-reads (event_waiters.h) */
        event_waiters_note(req->user.id, type);
    return rc;
}

db_status event_record_reply(db_conn *db, request *req, const char *type, const char *member)
{
    if (!member)
        return event_record(db, req, type, req->resp_body);
    json_t *body = json_loads(req->resp_body ? req->resp_body : "", 0, NULL);
    char *object = json_dumps(json_object_get(body, member), JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(body);
    if (!object)
        return DB_ERROR;
    db_status rc = event_record(db, req, type, object);
    free(object);
    return rc;
}

db_status event_record_payment(db_conn *db, request *req, bool succeeded, uint64_t order_id)
{
    db_status rc = succeeded ? event_record_reply(db, req, "payment.succeeded", NULL)
                             : event_record_reply(db, req, "payment.failed", "payment");
    if (rc == DB_DONE && succeeded && order_id)
        rc = event_record_order(db, req, order_id);
    return rc;
}

db_status event_record_refunded_order(db_conn *db, request *req, uint64_t payment_id)
{
    if (db_changes(db) == 0)
        return DB_DONE;
    db_stmt *st =
        db_query(db, "SELECT order_id FROM payments WHERE id = $1", "i", (int64_t)payment_id);
    uint64_t order = db_step(st) == DB_ROW ? (uint64_t)db_int(st, 0) : 0;
    db_done(st);
    return order ? event_record_order(db, req, order) : DB_DONE;
}

db_status event_record_order(db_conn *db, request *req, uint64_t order_id)
{
    char *order = order_read_text(db, order_id);
    db_status rc = order ? event_record(db, req, "order.status_changed", order) : DB_ERROR;
    free(order);
    return rc;
}

/* ---- GET /v1/events, GET /v1/events/{id} ---- */

#define EVENT_COLUMNS "id, type, data, created_at"

static void write_event_row(db_stmt *st, jsonw *w)
{
    event_document_write(w, (uint64_t)db_int(st, 0), db_text(st, 1), db_text(st, 2), db_int(st, 3));
}

static const resource event_resource = {
    .noun = "event",
    RESOURCE_TABLE("events", EVENT_COLUMNS, "user_id"),
    .id_prefix = "evt",
    .path = "/v1/events/",
    .write_row = write_event_row,
    .unmarked_rows = true,
};

static const list_query events_list_query = {
    .name = "events",
    .of = &event_resource,
    .parent_column = "user_id",
    .status_column = "type",
    .status_param = "type",
    .status_list = true,
    .time_column = "created_at",
    .id_bounds = true, /* created_at_of(id); partitioned by id on PostgreSQL */
};

/* GET /v1/events?wait=N: an empty page waits, parked in the registry (api/event_waiters.h),
 * until an event the filters let through is written or N seconds pass; every wake reads the
 * page again. */
static step_result events_list_read(request *req, void *ctx);

static step_result events_list_wake(request *req, void *ctx)
{
    return request_blocking_then(req, events_list_read, ctx); /* the waker thread never reads */
}

static step_result park_or_answer(request *req, event_wait *w)
{
    if (event_wait_over(w))
        return STEP_DONE; /* the empty page it has */
    if (event_wait_park(w))
        return STEP_WAITING;
    reply_forget(req, 0);
    reply_header(req, "Retry-After", "1");
    reply_error(req, ERR_OVERLOADED, "too many requests wait for events on this node");
    return STEP_DONE;
}

static step_result events_list_read(request *req, void *ctx)
{
    reply_forget(req, 0);
    if (list_page(req, &events_list_query, req->user.id, NULL) != 0)
        return STEP_DONE;
    return park_or_answer(req, ctx);
}

/* Answers at once, on the HTTP thread, unless the page is empty and the request may wait: most
 * lists never suspend their connection. */
void events_list_prepare(request *req)
{
    const list_params *f = req->input;
    if (list_page(req, &events_list_query, req->user.id, NULL) == 0 && f->wait > 0)
        reply_forget(req, 0); /* no answer yet: events_list, suspended, waits */
}

step_result events_list(request *req, void *ctx)
{
    (void)ctx;
    const list_params *f = req->input;
    event_wait *w = arena_alloc(&req->arena, sizeof *w);
    *w = (event_wait){.req = req,
                      .user = req->user.id,
                      .types = f->status,
                      .deadline_ns = req->start_ns + f->wait * 1000000000LL,
                      .step = events_list_wake,
                      .ctx = w};
    return events_list_read(req, w); /* again: an event may have come since prepare read */
}

void events_get(request *req)
{
    resource_get(req, &event_resource);
}

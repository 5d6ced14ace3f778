/* Orders (§8): business dedupe and a state machine.
 *
 * Dedupe: (user, external_order_id) is a unique index, and the INSERT asks it (ON CONFLICT DO
 * NOTHING): two racing creates cannot both win, whatever their Idempotency-Keys.
 * State machine: every transition this API makes is one conditional UPDATE that names the state
 * it leaves (and, under If-Match or a body version, the version it expects), so the check and
 * the write cannot be separated by another writer. created → paid is made by a payment
 * (payments.c), paid → refunded by the refund that completes the amount (refunds.c). */
#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/timefmt.h"
#include "idem/idem.h"

#define ORDER_COLUMNS                                                                              \
    "id, external_order_id, amount, currency, status, payment_id, version, created_at, "           \
    "updated_at"

json_t *order_json(db_stmt *st)
{
    return json_pack("{s:o, s:s, s:s, s:I, s:s, s:s, s:o, s:I, s:o, s:o}", "id",
                     json_id("ord", (uint64_t)db_int(st, 0)), "object", "order",
                     "external_order_id", db_text(st, 1), "amount", (json_int_t)db_int(st, 2),
                     "currency", db_text(st, 3), "status", db_text(st, 4), "payment_id",
                     db_is_null(st, 5) ? json_null() : json_id("pay", (uint64_t)db_int(st, 5)),
                     "version", (json_int_t)db_int(st, 6), "created_at", json_time(db_int(st, 7)),
                     "updated_at", json_time(db_int(st, 8)));
}

json_t *order_read_json(db_conn *db, uint64_t id)
{
    db_stmt *st =
        db_query(db, "SELECT " ORDER_COLUMNS " FROM orders WHERE id = $1", "i", (int64_t)id);
    json_t *out = db_step(st) == DB_ROW ? order_json(st) : NULL;
    db_done(st);
    return out;
}

static const char *const order_statuses[] = {"created",   "paid",     "cancelled", "shipped",
                                             "completed", "refunded", NULL};

/* The one state a transition made by PUT .../status may leave for `to`, or NULL when this call
 * never makes it (created → paid and paid → refunded belong to payments and refunds). */
static const char *transition_source(const char *to)
{
    static const struct {
        const char *from, *to;
    } allowed[] = {{"created", "cancelled"}, {"paid", "shipped"}, {"shipped", "completed"}};
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        if (!strcmp(allowed[i].to, to))
            return allowed[i].from;
    return NULL;
}

/* ---- create ---- */

typedef struct new_order {
    request *req;
    uint64_t id;
    const char *external_id, *description;
    int64_t amount, now;
    char currency[4];
} new_order;

static int insert_order(db_conn *db, void *arg)
{
    new_order *o = arg;
    request *req = o->req;
    db_status rc = db_exec(db,
                           "INSERT INTO orders (id, user_id, external_order_id, amount, currency, "
                           "description, status, version, created_at, updated_at) "
                           "VALUES ($1, $2, $3, $4, $5, $6, 'created', 1, $7, $7) "
                           "ON CONFLICT (user_id, external_order_id) DO NOTHING",
                           "iisissi", (int64_t)o->id, (int64_t)req->user.id, o->external_id,
                           o->amount, o->currency, o->description, o->now);
    if (rc != DB_DONE)
        return rc;
    if (db_changes(db) == 0) {
        /* the unique index decided: answer with the order that holds the external id */
        db_stmt *st =
            db_query(db, "SELECT id FROM orders WHERE user_id = $1 AND external_order_id = $2",
                     "is", (int64_t)req->user.id, o->external_id);
        bool found = db_step(st) == DB_ROW;
        if (found)
            reply_error_extra(
                req, ERR_DUPLICATE_ORDER, "an order with this external_order_id exists",
                json_pack("{s:o}", "existing_order_id", json_id("ord", (uint64_t)db_int(st, 0))));
        db_done(st);
        return found ? 0 : DB_BUSY;
    }
    char id[ID_STR_MAX];
    id_format(o->id, "ord", id);
    json_t *body =
        json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:n, s:i, s:o, s:o}", "id", id, "object", "order",
                  "external_order_id", o->external_id, "amount", (json_int_t)o->amount, "currency",
                  o->currency, "status", "created", "payment_id", "version", 1, "created_at",
                  json_time(o->now), "updated_at", json_time(o->now));
    reply_etag(req, 1);
    reply_created(req, "/v1/orders", id, body);
    /* §15: the event commits with the order */
    return event_record_reply(db, req, "order.created", NULL);
}

void orders_create(request *req)
{
    static const body_field fields[] = {
        {"external_order_id", FIELD_STRING, true, 1, 128},
        {"amount", FIELD_INTEGER, true, 1, MAX_AMOUNT},
        {"currency", FIELD_STRING, true, 3, 3},
        {"description", FIELD_STRING, false, 0, 500},
    };
    if (!CHECK_BODY_OR_REPLY(req, fields))
        return;
    new_order o = {.req = req,
                   .external_id = body_string(req, "external_order_id"),
                   .description = body_string(req, "description"),
                   .amount = body_int(req, "amount", 0)};
    if (!normalize_currency(body_string(req, "currency"), o.currency)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "currency", "currency must be 3 letters");
        return;
    }
    o.id = app_next_id(req->app);
    o.now = created_at_of(o.id);
    write_result w = commit_response(req, insert_order, &o);
    if (w != WRITE_OK && w != WRITE_FENCED) /* fenced: the answer is what the key holds */
        reply_error(req, ERR_INTERNAL, "the order could not be stored");
}

/* ---- read ---- */

void orders_get(request *req)
{
    uint64_t id;
    if (!path_id_or_reply(req, 0, "ord", &id))
        return;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    db_stmt *st =
        db_query(db, "SELECT " ORDER_COLUMNS " FROM orders WHERE id = $1 AND user_id = $2", "ii",
                 (int64_t)id, (int64_t)req->user.id);
    if (db_step(st) == DB_ROW) {
        if (!etag_not_modified_or_set(req, db_int(st, 6)))
            reply_json(req, 200, order_json(st));
    } else {
        reply_error(req, ERR_RESOURCE_MISSING, "no such order");
    }
    db_done(st);
}

static const list_query orders_list_query = {
    .name = "orders",
    .select = "SELECT " ORDER_COLUMNS " FROM orders",
    .parent_column = "user_id",
    .created_index = 7,
    .id_index = 0,
    .status_column = "status",
    .statuses = order_statuses,
    .to_json = order_json,
};

void orders_list(request *req)
{
    list_page(req, &orders_list_query, req->user.id, NULL);
}

/* ---- PUT /v1/orders/{id}/status ---- */

typedef struct status_change {
    request *req;
    uint64_t id;
    const char *to, *from; /* from: NULL when this call cannot make the transition */
    int64_t expected;      /* 0: any version */
    bool from_if_match;
    int64_t now;
} status_change;

static int change_status(db_conn *db, void *arg)
{
    status_change *c = arg;
    request *req = c->req;
    bool changed = false;
    if (c->from) {
        /* the check and the write in one statement: the state left and the version expected */
        db_status rc = db_exec(db,
                               "UPDATE orders SET status = $3, version = version + 1, "
                               "updated_at = $4 WHERE id = $1 AND user_id = $2 AND status = $5 "
                               "AND (version = $6 OR $6 = 0)",
                               "iisisi", (int64_t)c->id, (int64_t)req->user.id, c->to, c->now,
                               c->from, c->expected);
        if (rc != DB_DONE)
            return rc;
        changed = db_changes(db) == 1;
    }
    db_stmt *st =
        db_query(db, "SELECT " ORDER_COLUMNS " FROM orders WHERE id = $1 AND user_id = $2", "ii",
                 (int64_t)c->id, (int64_t)req->user.id);
    if (db_step(st) != DB_ROW) {
        db_done(st);
        reply_error(req, ERR_RESOURCE_MISSING, "no such order");
        return 0;
    }
    const char *status = db_text(st, 4);
    int64_t version = db_int(st, 6);
    int rc = 0;
    if (changed || !strcmp(status, c->to)) {
        /* done now, or already: a repeated sync is harmless (RFC 9110 §13.1.1 allows a 2xx when
         * the requested change has already happened, whatever If-Match said) */
        reply_etag(req, version);
        reply_json(req, 200, order_json(st));
    } else if (c->expected != 0 && version != c->expected) {
        reply_version_conflict(req, c->from_if_match, version);
    } else if (c->from && !strcmp(status, c->from)) {
        rc = DB_BUSY; /* PostgreSQL: changed between our UPDATE and this read; run again */
    } else {
        char detail[160];
        snprintf(detail, sizeof detail, "an order cannot go from %s to %s by this call", status,
                 c->to);
        reply_error_extra(req, ERR_INVALID_STATE_TRANSITION, detail,
                          json_pack("{s:s}", "current_status", status));
    }
    db_done(st);
    /* §15: only a real change is an event (written after the row is read: one statement open at
     * a time on the connection) */
    if (rc == 0 && changed)
        rc = event_record_reply(db, req, "order.status_changed", NULL);
    return rc;
}

void orders_set_status(request *req)
{
    static const body_field fields[] = {
        {"status", FIELD_STRING, true, 1, 32},
        VERSION_FIELD,
    };
    status_change c = {.req = req, .now = now_us()};
    if (!path_id_or_reply(req, 0, "ord", &c.id) || !CHECK_BODY_OR_REPLY(req, fields))
        return;
    c.to = body_string(req, "status");
    bool known = false;
    for (const char *const *s = order_statuses; *s && !known; s++)
        known = !strcmp(*s, c.to);
    if (!known) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "status",
                            "status must be one of created, paid, cancelled, shipped, completed, "
                            "refunded");
        return;
    }
    c.from = transition_source(c.to);
    if_match_version(req, &c.expected, &c.from_if_match);
    if (store_write(req->app->store, change_status, &c) != 0)
        reply_error(req, ERR_INTERNAL, "the order could not be updated");
}

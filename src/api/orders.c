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
#include "api/enums.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/timefmt.h"
#include "idem/idem.h"

#define ORDER_COLUMNS                                                                              \
    "id, external_order_id, amount, currency, status, payment_id, version, created_at, "           \
    "updated_at"

static void write_order_row(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "ord", (uint64_t)db_int(st, 0));
    jw_member_object(w, "order");
    jw_member_string(w, "external_order_id", db_text(st, 1));
    jw_member_int(w, "amount", db_int(st, 2));
    jw_member_string(w, "currency", db_text(st, 3));
    jw_member_string(w, "status", db_text(st, 4));
    jw_member_id(w, "payment_id", "pay", (uint64_t)db_int(st, 5)); /* NULL reads as 0: null */
    jw_member_int(w, "version", db_int(st, 6));
    jw_member_time(w, "created_at", db_int(st, 7));
    jw_member_time(w, "updated_at", db_int(st, 8));
    jw_object_end(w);
}

const resource order_resource = {
    .noun = "order",
    RESOURCE_TABLE("orders", ORDER_COLUMNS, "user_id"),
    .id_prefix = "ord",
    .path = "/v1/orders/",
    .version_column = "version",
    .write_row = write_order_row,
};

char *order_read_text(db_conn *db, uint64_t id)
{
    db_stmt *st =
        db_query(db, "SELECT " ORDER_COLUMNS " FROM orders WHERE id = $1", "i", (int64_t)id);
    char *out = NULL;
    if (db_step(st) == DB_ROW) {
        jsonw w;
        jw_init(&w);
        write_order_row(st, &w);
        out = jw_take(&w, NULL);
    }
    db_done(st);
    return out;
}

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

typedef struct order_input {
    const char *external_id, *description;
    int64_t amount;
    char currency[4];
} order_input;

static const field order_fields[] = {
    {.name = "external_order_id",
     .kind = KIND_STRING,
     .required = true,
     IN(order_input, external_id),
     .min = 1,
     .max = 128},
    AMOUNT_FIELD(order_input, amount, true),
    CURRENCY_FIELD(order_input, currency),
    DESCRIPTION_FIELD(order_input, description, 500),
};
const schema orders_create_body = SCHEMA(order_input, order_fields);

typedef struct new_order {
    request *req;
    const order_input *in;
    uint64_t id;
    int64_t now;
} new_order;

static write_result insert_order(db_conn *db, void *arg)
{
    new_order *o = arg;
    request *req = o->req;
    bool duplicate;
    db_status rc = resource_created(
        req, &order_resource,
        db_query(db,
                 "INSERT INTO orders (id, user_id, external_order_id, amount, "
                 "currency, description, status, version, created_at, updated_at) "
                 "VALUES ($1, $2, $3, $4, $5, $6, 'created', 1, $7, $7) "
                 "ON CONFLICT (user_id, external_order_id) DO NOTHING "
                 "RETURNING " ORDER_COLUMNS,
                 "iisissi", (int64_t)o->id, (int64_t)req->user.id, o->in->external_id,
                 o->in->amount, o->in->currency, o->in->description, o->now),
        &duplicate);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (!duplicate) /* §15: the event commits with the order */
        return write_result_of_db(event_record_reply(db, req, "order.created", NULL));
    /* the unique index decided: answer with the order that holds the external id */
    db_stmt *st =
        db_query(db, "SELECT id FROM orders WHERE user_id = $1 AND external_order_id = $2", "is",
                 (int64_t)req->user.id, o->in->external_id);
    bool found = db_step(st) == DB_ROW;
    if (found)
        reply_error_extra(
            req, ERR_DUPLICATE_ORDER, "an order with this external_order_id exists",
            json_pack("{s:o}", "existing_order_id", json_id("ord", (uint64_t)db_int(st, 0))));
    db_done(st);
    return found ? WRITE_OK : WRITE_RETRY;
}

step_result orders_create(request *req, void *prepared)
{
    (void)prepared;
    new_order *o = arena_alloc(&req->arena, sizeof *o);
    *o = (new_order){.req = req, .in = req->input};
    if (!new_row_id_or_reply(req, &o->id, &o->now))
        return STEP_DONE;
    return resource_commit_then_answer(req, insert_order, o, "order", NULL);
}

/* ---- read ---- */

void orders_get(request *req)
{
    resource_get(req, &order_resource);
}

static const list_query orders_list_query = {
    .name = "orders",
    .of = &order_resource,
    .parent_column = "user_id",
    .status_column = "status",
};

void orders_list(request *req)
{
    list_page(req, &orders_list_query, req->user.id, NULL);
}

/* ---- PUT /v1/orders/{id}/status ---- */

typedef struct order_status_input {
    const char *status;
    int64_t version;
} order_status_input;

static const field order_status_fields[] = {
    {.name = "status",
     .kind = KIND_ENUM,
     .required = true,
     IN(order_status_input, status),
     .values = order_statuses},
    VERSION_FIELD(order_status_input, version),
};
const schema orders_status_body = SCHEMA(order_status_input, order_status_fields);

typedef struct status_change {
    request *req;
    uint64_t id;
    const char *to, *from; /* from: NULL when this call cannot make the transition */
    int64_t expected;      /* 0: any version */
    bool from_if_match;
    int64_t now;
} status_change;

static write_result change_status(db_conn *db, void *arg)
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
            return write_result_of_db(rc);
        changed = db_changes(db) == 1;
    }
    db_stmt *st =
        db_query(db, "SELECT " ORDER_COLUMNS " FROM orders WHERE id = $1 AND user_id = $2", "ii",
                 (int64_t)c->id, (int64_t)req->user.id);
    if (db_step(st) != DB_ROW) {
        db_done(st);
        reply_error(req, ERR_RESOURCE_MISSING, "no such order");
        return WRITE_OK;
    }
    const char *status = db_text(st, 4);
    int64_t version = db_int(st, 6);
    db_status rc = DB_DONE;
    if (changed || !strcmp(status, c->to)) {
        /* done now, or already: a repeated sync is harmless (RFC 9110 §13.1.1 allows a 2xx when
         * the requested change has already happened, whatever If-Match said) */
        resource_reply(req, &order_resource, st, 200);
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
    if (rc == DB_DONE && changed)
        rc = event_record_reply(db, req, "order.status_changed", NULL);
    return write_result_of_db(rc);
}

step_result orders_set_status(request *req, void *prepared)
{
    (void)prepared;
    const order_status_input *in = req->input;
    status_change *c = arena_alloc(&req->arena, sizeof *c);
    *c = (status_change){.req = req, .to = in->status, .now = now_us()};
    if (!path_id_or_reply(req, 0, "ord", &c->id))
        return STEP_DONE;
    c->from = transition_source(c->to);
    if_match_version(req, in->version, &c->expected, &c->from_if_match);
    return resource_write_then_answer(req, change_status, c, "the order could not be updated");
}

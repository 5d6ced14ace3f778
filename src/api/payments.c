/* Payments (§5). The handler reads as the exactly-once code it may assume: the idempotency
 * engine has claimed the key, so this runs once per claim; the processor deduplicates on the
 * claim's processor key, so calling it again after a lost answer charges at most once; and the
 * payment, the account credit, the order update and the key's stored answer commit together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/common.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "api/stats.h"
#include "core/jsonw.h"
#include "core/timefmt.h"
#include "idem/idem.h"
#include "processor/processor.h"
#include "server/fault.h"

#define PAYMENT_COLUMNS                                                                            \
    "id, account_id, amount, currency, status, source, order_id, description, metadata, "          \
    "refunded_amount, processor_charge_id, created_at"

/* A payment as the contract shows it, whether it comes from a row or is being created. */
typedef struct payment_view {
    uint64_t id, account_id, order_id; /* order_id 0: none */
    int64_t amount, refunded_amount, created_at;
    const char *currency, *status, *source, *description, *metadata, *charge_id;
} payment_view;

static void write_payment(jsonw *w, const payment_view *v)
{
    char id[ID_STR_MAX], when[RFC3339_STR_MAX];
    jw_object_begin(w);
    jw_key(w, "id");
    id_format(v->id, "pay", id);
    jw_string(w, id);
    jw_key(w, "object");
    jw_string(w, "payment");
    jw_key(w, "account_id");
    id_format(v->account_id, "acct", id);
    jw_string(w, id);
    jw_key(w, "amount");
    jw_int(w, v->amount);
    jw_key(w, "currency");
    jw_string(w, v->currency);
    jw_key(w, "status");
    jw_string(w, v->status);
    jw_key(w, "source");
    jw_string(w, v->source);
    jw_key(w, "order_id");
    if (v->order_id) {
        id_format(v->order_id, "ord", id);
        jw_string(w, id);
    } else {
        jw_null(w);
    }
    jw_key(w, "description");
    jw_string(w, v->description);
    jw_key(w, "metadata");
    jw_raw(w, v->metadata, "{}"); /* stored as compact JSON, validated on the way in */
    jw_key(w, "refunded_amount");
    jw_int(w, v->refunded_amount);
    jw_key(w, "processor_charge_id");
    jw_string(w, v->charge_id);
    jw_key(w, "created_at");
    format_rfc3339_ms(v->created_at, when);
    jw_string(w, when);
    jw_object_end(w);
}

static void write_payment_row(db_stmt *st, jsonw *w)
{
    payment_view v = {
        .id = (uint64_t)db_int(st, 0),
        .account_id = (uint64_t)db_int(st, 1),
        .amount = db_int(st, 2),
        .currency = db_text(st, 3),
        .status = db_text(st, 4),
        .source = db_text(st, 5),
        .order_id = db_is_null(st, 6) ? 0 : (uint64_t)db_int(st, 6),
        .description = db_text(st, 7),
        .metadata = db_text(st, 8),
        .refunded_amount = db_int(st, 9),
        .charge_id = db_text(st, 10),
        .created_at = db_int(st, 11),
    };
    write_payment(w, &v);
}

typedef struct payment {
    request *req;
    uint64_t id, account_id, order_id; /* order_id 0: none */
    int64_t amount, created_at;
    char currency[4];
    const char *source, *description;
    char *metadata; /* canonical JSON or NULL */
    proc_result charge;
} payment;

static void write_new_payment(jsonw *w, const payment *p, const char *status)
{
    payment_view v = {.id = p->id,
                      .account_id = p->account_id,
                      .order_id = p->order_id,
                      .amount = p->amount,
                      .created_at = p->created_at,
                      .currency = p->currency,
                      .status = status,
                      .source = p->source,
                      .description = p->description,
                      .metadata = p->metadata,
                      .charge_id = p->charge.id};
    write_payment(w, &v);
}

/* The order rows of the §5 table, read before the processor is called. */
static bool order_payable_or_reply(request *req, db_conn *db, payment *p)
{
    db_stmt *st = db_query(db,
                           "SELECT amount, currency, status, payment_id FROM orders "
                           "WHERE id = $1 AND user_id = $2",
                           "ii", (int64_t)p->order_id, (int64_t)req->user.id);
    bool ok = false;
    if (db_step(st) != DB_ROW) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such order");
    } else if (db_int(st, 0) != p->amount || strcmp(db_text(st, 1), p->currency) != 0) {
        reply_error(req, ERR_ORDER_MISMATCH, "amount and currency must equal the order's");
    } else if (!db_is_null(st, 3)) {
        reply_error_extra(
            req, ERR_DUPLICATE_PAYMENT, "the order is already paid",
            json_pack("{s:o}", "existing_payment_id", json_id("pay", (uint64_t)db_int(st, 3))));
    } else if (strcmp(db_text(st, 2), "created") != 0) {
        reply_error_extra(req, ERR_ORDER_NOT_PAYABLE, "the order cannot be paid in its status",
                          json_pack("{s:s}", "current_status", db_text(st, 2)));
    } else {
        ok = true;
    }
    db_done(st);
    return ok;
}

static int record_payment(db_conn *db, void *arg)
{
    payment *p = arg;
    request *req = p->req;
    bool approved = p->charge.status == PROC_APPROVED;
    const char *status = approved ? "succeeded" : "failed";
    db_status rc = db_exec_checked(
        db, -1, 0,
        "INSERT INTO payments (id, user_id, account_id, amount, currency, status, source, "
        "order_id, "
        "description, metadata, refunded_amount, processor_charge_id, decline_code, created_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0, $11, $12, $13)",
        "iiiissszssssi", (int64_t)p->id, (int64_t)req->user.id, (int64_t)p->account_id, p->amount,
        p->currency, status, p->source, (int64_t)p->order_id, p->description, p->metadata,
        p->charge.id, approved ? NULL : p->charge.decline_code, p->created_at);
    if (rc != DB_DONE)
        return rc; /* DB_CONSTRAINT: the caller finds out which (the order's, or an id's) */
    if (approved) {
        /* the balance and the volume rollup (api/stats.c) move with the payment, at the
         * batch's commit: every payment of an account adds to the same rows */
        rc = account_credit_at_commit(db, p->account_id, p->amount, p->created_at);
        if (rc == DB_DONE)
            rc = stats_record_payment(db, p->account_id, p->created_at, p->amount);
        if (rc != DB_DONE)
            return rc; /* outside a batch they apply at once, and can fail */
        if (p->order_id &&
            (db_exec(db,
                     "UPDATE orders SET status = 'paid', payment_id = $2, version = version + 1, "
                     "updated_at = $3 WHERE id = $1 AND status = 'created'",
                     "iii", (int64_t)p->order_id, (int64_t)p->id, p->created_at) != DB_DONE ||
             db_changes(db) != 1))
            return WRITE_CONFLICT; /* the order left 'created' meanwhile */
        char location[64];
        char id[ID_STR_MAX];
        id_format(p->id, "pay", id);
        snprintf(location, sizeof location, "/v1/payments/%s", id);
        reply_header(req, "Location", location);
        jsonw w;
        jw_init(&w);
        write_new_payment(&w, p, status);
        reply_jsonw(req, 201, &w);
    } else {
        /* the decline's problem carries the stored payment: the one shape, read back */
        jsonw w;
        jw_init(&w);
        write_new_payment(&w, p, status);
        char *text = jw_take(&w, NULL);
        reply_error_extra(req, ERR_CARD_DECLINED, "the card was declined",
                          json_pack("{s:s, s:o}", "decline_code", p->charge.decline_code, "payment",
                                    json_loads(text, 0, NULL)));
        free(text);
    }
    /* §15: the payment's event, and its order's, commit with the payment */
    return event_record_payment(db, req, approved, p->order_id);
}

/* Validation: everything that answers 400/404 and releases the key, before money moves. */
static bool read_payment_or_reply(request *req, payment *p)
{
    static const body_field fields[] = {
        {"account_id", FIELD_STRING, true, 1, 64}, {"amount", FIELD_INTEGER, true, 1, MAX_AMOUNT},
        {"currency", FIELD_STRING, true, 3, 3},    {"source", FIELD_STRING, true, 1, 68},
        {"order_id", FIELD_STRING, false, 1, 64},  {"description", FIELD_STRING, false, 0, 500},
        {"metadata", FIELD_OBJECT, false, 0, 20},
    };
    if (!CHECK_BODY_OR_REPLY(req, fields))
        return false;
    p->req = req;
    p->amount = body_int(req, "amount", 0);
    p->source = body_string(req, "source");
    p->description = body_string(req, "description");
    if (!normalize_currency(body_string(req, "currency"), p->currency)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "currency", "currency must be 3 letters");
        return false;
    }
    if (!processor_valid_source(p->source)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "source",
                            "source must be a card token such as tok_visa");
        return false;
    }
    json_t *meta = json_object_get(req->json, "metadata");
    if (meta && !json_is_null(meta)) {
        const char *k;
        json_t *v;
        json_object_foreach(meta, k, v)
        {
            if (!json_is_string(v) || strlen(k) > 40 || json_string_length(v) > 500) {
                reply_invalid_param(req, ERR_INVALID_PARAMETER, "metadata",
                                    "metadata maps keys of up to 40 characters to strings of up "
                                    "to 500");
                return false;
            }
        }
        p->metadata = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
    }
    db_conn *db = reader_or_reply(req);
    if (!db)
        return false;
    char account_currency[4];
    if (id_parse(body_string(req, "account_id"), "acct", &p->account_id) != 0 ||
        !account_owned(db, req->user.id, p->account_id, account_currency)) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such account");
        return false;
    }
    if (strcmp(account_currency, p->currency) != 0) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "currency",
                            "currency must equal the account's currency");
        return false;
    }
    const char *order = body_string(req, "order_id");
    if (order) {
        if (id_parse(order, "ord", &p->order_id) != 0) {
            reply_error(req, ERR_RESOURCE_MISSING, "no such order");
            return false;
        }
        if (!order_payable_or_reply(req, db, p))
            return false;
    }
    return true;
}

static void reply_processor_unavailable(request *req)
{
    reply_header(req, "Retry-After", "1");
    reply_error(req, ERR_PROCESSOR_UNAVAILABLE,
                "the processor did not answer; retry with the same Idempotency-Key");
}

static void reply_database_unavailable(request *req)
{
    reply_header(req, "Retry-After", "1");
    reply_error(req, ERR_DATABASE_UNAVAILABLE,
                "the payment could not be recorded; retry with the same Idempotency-Key");
}

/* After a conflict: true when the order is no longer payable (another payment took it, or it
 * left 'created'), with the order's answer set; false when the conflict was something else. */
static bool order_taken_or_reply(request *req, payment *p)
{
    db_conn *db = p->order_id ? store_reader(req->app->store) : NULL;
    if (!db)
        return false;
    order_payable_or_reply(req, db, p);
    if (req->error == ERR_NONE)
        return false; /* the order is still payable: the conflict was not the order's */
    if (req->error == ERR_RESOURCE_MISSING || req->error == ERR_ORDER_MISMATCH)
        return false; /* cannot happen to an order we read before charging */
    return true;
}

/* Voids an approved charge of ours that no payment will carry: inline, under its own processor
 * key; if the processor does not confirm, queued so the recoverer retries it until it does. */
static void void_charge(request *req, payment *p)
{
    if (p->charge.status != PROC_APPROVED)
        return;
    char void_key[80];
    snprintf(void_key, sizeof void_key, "%s:void", req->idem->processor_key);
    proc_result voided = processor_refund(req->app->processor, void_key, p->charge.id, p->amount);
    if (voided.status != PROC_APPROVED)
        idem_queue_charge_void(req, p->account_id, p->charge.id, p->amount);
}

static void finish_payment(request *req, payment *p)
{
    p->id = app_next_id(req->app);
    p->created_at = created_at_of(p->id);
    write_result r = commit_response(req, record_payment, p);
    switch (r) {
    case WRITE_OK:
    case WRITE_REFUSED:
        break;
    case WRITE_FENCED:
        /* We lost the key while we charged: the answer is already what the key holds. Our
         * charge is the new holder's too when it asks under the same processor key; the
         * recoverer checks that a record carries it and voids it otherwise. */
        if (p->charge.status == PROC_APPROVED)
            idem_queue_charge_void(req, p->account_id, p->charge.id, p->amount);
        break;
    case WRITE_CONFLICT:
        if (order_taken_or_reply(req, p)) {
            /* The order was paid (or closed) by another request between our check and our
             * commit: this charge must not stay. */
            void_charge(req, p);
            break;
        }
        /* not the order's (an id collision, a check): nothing was kept, the charge is
         * recorded by a retry under the same processor key */
        reply_database_unavailable(req);
        break;
    case WRITE_RETRY:
    case WRITE_FAILED:
        reply_database_unavailable(req); /* charged or not, the key stays resumable */
        break;
    }
}

void payments_create(request *req)
{
    payment p = {0};
    if (!read_payment_or_reply(req, &p)) {
        free(p.metadata);
        return;
    }
    fault_point("before-charge");
    p.charge = processor_charge(req->app->processor, req->idem->processor_key, p.amount, p.currency,
                                p.source);
    if (p.charge.status == PROC_UNAVAILABLE) {
        reply_processor_unavailable(req);
    } else {
        fault_point("crash-after-charge");
        fault_point("after-charge");
        finish_payment(req, &p);
    }
    free(p.metadata);
}

/* The recoverer's path: ask the processor what happened under this key; never charge. */
void payments_recover(request *req)
{
    payment p = {0};
    if (!read_payment_or_reply(req, &p)) {
        free(p.metadata);
        return;
    }
    p.charge = processor_find_charge(req->app->processor, req->idem->processor_key);
    if (p.charge.status == PROC_NOT_FOUND)
        reply_error(req, ERR_RESOURCE_MISSING, "nothing was charged; the key is released");
    else if (p.charge.status == PROC_UNAVAILABLE)
        reply_processor_unavailable(req);
    else
        finish_payment(req, &p);
    free(p.metadata);
}

void payments_get(request *req)
{
    uint64_t id;
    if (!path_id_or_reply(req, 0, "pay", &id))
        return;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    db_stmt *st =
        db_query(db, "SELECT " PAYMENT_COLUMNS " FROM payments WHERE id = $1 AND user_id = $2",
                 "ii", (int64_t)id, (int64_t)req->user.id);
    if (db_step(st) == DB_ROW) {
        jsonw w;
        jw_init(&w);
        write_payment_row(st, &w);
        reply_jsonw(req, 200, &w);
    } else
        reply_error(req, ERR_RESOURCE_MISSING, "no such payment");
    db_done(st);
}

static const char *const payment_statuses[] = {"succeeded", "failed", "partially_refunded",
                                               "refunded", NULL};

static const list_query payments_list_query = {
    .name = "payments",
    .select = "SELECT " PAYMENT_COLUMNS " FROM payments",
    .parent_column = "account_id",
    .created_index = 11,
    .id_index = 0,
    .status_column = "status",
    .statuses = payment_statuses,
    .time_column = "created_at",
    .write_row = write_payment_row,
};

void payments_list(request *req)
{
    uint64_t account;
    if (path_account_or_reply(req, 0, &account))
        list_page(req, &payments_list_query, account, NULL);
}

void payments_count(request *req)
{
    uint64_t account;
    if (path_account_or_reply(req, 0, &account))
        list_count(req, &payments_list_query, "payments", account);
}

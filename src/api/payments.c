/* Payments (§5). The handler reads as the exactly-once code it may assume: the idempotency
 * engine has claimed the key, so this runs once per claim; the processor deduplicates on the
 * claim's processor key, so calling it again after a lost answer charges at most once; and the
 * payment, the account credit, the order update and the key's stored answer commit together. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/common.h"
#include "api/enums.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/ledger.h"
#include "api/pagination.h"
#include "api/stats.h"
#include "core/jsonw.h"
#include "core/timefmt.h"
#include "idem/idem.h"
#include "node/fault.h"
#include "processor/processor.h"

#define PAYMENT_COLUMNS                                                                            \
    "id, account_id, amount, currency, status, source, order_id, description, metadata, "          \
    "refunded_amount, processor_charge_id, created_at, capture_method, amount_capturable, "        \
    "amount_captured, amount_released, capture_before, canceled_at, cancellation_reason"

/* A payment as the contract shows it, whether it comes from a row or is being created. */
typedef struct payment_view {
    uint64_t id, account_id, order_id; /* order_id 0: none */
    int64_t amount, refunded_amount, created_at;
    const char *currency, *status, *source, *description, *metadata, *charge_id;
    /* §17: the hold; capture_before and canceled_at 0: none */
    const char *capture_method, *cancellation_reason;
    int64_t capturable, captured, released, capture_before, canceled_at;
} payment_view;

/* Inline as the jw_member_* are (core/jsonw.h), so that its key's length is known at its call. */
JW_INLINE void member_time_or_null(jsonw *w, const char *key, int64_t at)
{
    if (at)
        jw_member_time(w, key, at);
    else
        jw_member_null(w, key);
}

static void write_payment(jsonw *w, const payment_view *v)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "pay", v->id);
    jw_member_object(w, "payment");
    jw_member_id(w, "account_id", "acct", v->account_id);
    jw_member_int(w, "amount", v->amount);
    jw_member_string(w, "currency", v->currency);
    jw_member_string(w, "status", v->status);
    jw_member_string(w, "source", v->source);
    jw_member_id(w, "order_id", "ord", v->order_id);
    jw_member_string(w, "description", v->description);
    jw_key(w, "metadata");
    jw_raw(w, v->metadata, "{}"); /* stored as compact JSON, validated on the way in */
    jw_member_int(w, "refunded_amount", v->refunded_amount);
    jw_member_string(w, "processor_charge_id", v->charge_id);
    jw_member_string(w, "capture_method", v->capture_method);
    jw_member_int(w, "amount_capturable", v->capturable);
    jw_member_int(w, "amount_captured", v->captured);
    jw_member_int(w, "amount_released", v->released);
    member_time_or_null(w, "capture_before", v->capture_before);
    member_time_or_null(w, "canceled_at", v->canceled_at);
    jw_member_string(w, "cancellation_reason", v->cancellation_reason);
    jw_member_time(w, "created_at", v->created_at);
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
        .order_id = (uint64_t)db_int(st, 6), /* NULL reads as 0: none */
        .description = db_text(st, 7),
        .metadata = db_text(st, 8),
        .refunded_amount = db_int(st, 9),
        .charge_id = db_text(st, 10),
        .created_at = db_int(st, 11),
        .capture_method = db_text(st, 12),
        .capturable = db_int(st, 13),
        .captured = db_int(st, 14),
        .released = db_int(st, 15),
        .capture_before = db_int(st, 16),
        .canceled_at = db_int(st, 17),
        .cancellation_reason = db_text(st, 18),
    };
    write_payment(w, &v);
}

void payment_write_row(db_stmt *st, jsonw *w)
{
    write_payment_row(st, w);
}

const resource payment_resource = {
    .noun = "payment",
    RESOURCE_TABLE("payments", PAYMENT_COLUMNS, "user_id"),
    .id_prefix = "pay",
    .path = "/v1/payments/",
    .write_row = write_payment_row,
};

/* POST /v1/payments (§5) */
typedef struct payment_input {
    input_id account, order;
    int64_t amount;
    char currency[4];
    const char *source, *description;
    const char *metadata;       /* canonical JSON or NULL */
    const char *capture_method; /* §17: "automatic" (NULL) or "manual" */
} payment_input;

static const field payment_fields[] = {
    {.name = "account_id",
     .kind = KIND_ID,
     .required = true,
     IN(payment_input, account),
     .prefix = "acct"},
    AMOUNT_FIELD(payment_input, amount, true),
    CURRENCY_FIELD(payment_input, currency),
    {.name = "source",
     .kind = KIND_TOKEN,
     .required = true,
     IN(payment_input, source),
     .prefix = "tok_",
     .chars = "A-Za-z0-9_",
     .min = 1,
     .max = 64,
     .detail = "source must be a card token such as tok_visa"},
    {.name = "order_id", .kind = KIND_ID, IN(payment_input, order), .prefix = "ord"},
    DESCRIPTION_FIELD(payment_input, description, 500),
    {.name = "metadata", .kind = KIND_METADATA, IN(payment_input, metadata), .max = 20},
    {.name = "capture_method",
     .kind = KIND_ENUM,
     IN(payment_input, capture_method),
     .values = capture_methods},
};
const schema payments_create_body = SCHEMA(payment_input, payment_fields);

typedef struct payment {
    request *req;
    uint64_t id, account_id, order_id; /* order_id 0: none */
    int64_t amount, created_at;
    char currency[4];
    const char *source, *description;
    const char *metadata; /* canonical JSON (in the request's arena) or NULL */
    bool has_order;       /* an order_id was sent (its id may still name no order) */
    bool manual;          /* §17: the processor authorizes; captured later */
    int64_t capture_before;
    proc_result charge;
    bool charge_in_write; /* the charge is made in the payment's own write job (below) */
    bool charge_created;  /* ... and that job made it (false: an earlier holder of the key did) */
    char void_key[80];    /* a charge no payment will carry: its void's processor key */
    proc_result voided;
} payment;

static bool approved_status(const char *status)
{
    return strcmp(status, "failed") != 0;
}

/* The payment being recorded, in the row's one shape (write_payment): it is answered from memory,
 * as the row it inserts holds exactly these values, and a read back would cost every payment. */
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
                      .charge_id = p->charge.id,
                      .capture_method = p->manual ? "manual" : "automatic",
                      .capturable = p->manual && approved_status(status) ? p->amount : 0,
                      .captured = !p->manual && approved_status(status) ? p->amount : 0,
                      .capture_before =
                          p->manual && approved_status(status) ? p->capture_before : 0};
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

/* Whether the account's balance and its hour's volume can take the payment (sum_fits); when
 * not, the refusal is the answer and recorded() voids the charge. */
static write_result credit_fits_or_refuse(db_conn *db, payment *p)
{
    bool balance_fits = false, volume_fits = false;
    db_status rc = account_credit_fits(db, p->account_id, p->amount, &balance_fits);
    if (rc == DB_DONE && balance_fits)
        rc = stats_payment_fits(db, p->account_id, p->created_at, p->amount, &volume_fits);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (balance_fits && volume_fits)
        return WRITE_OK;
    reply_error(p->req, ERR_BALANCE_LIMIT_EXCEEDED,
                balance_fits ? "the account's payment volume cannot take this amount"
                             : "the account's balance cannot take this amount");
    return WRITE_REFUSED; /* nothing written; the engine stores the answer */
}

/* §17: a hold. Nothing reaches the account's available balance: the authorization's entry
 * moves the amount between its pending book and the currency's holds; the order is held by the
 * payment (payment_id set, still 'created') until the first capture pays it. */
static write_result record_authorization(db_conn *db, payment *p)
{
    request *req = p->req;
    db_status rc = db_exec(db,
                           "UPDATE accounts SET pending = pending + $2, version = version + 1, "
                           "updated_at = $3 WHERE id = $1",
                           "iii", (int64_t)p->account_id, p->amount, p->created_at);
    if (rc == DB_DONE)
        rc = ledger_post_authorization(db, req->app, req->user.id, p->id, p->account_id,
                                       p->currency, p->amount);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (p->order_id &&
        (db_exec(db,
                 "UPDATE orders SET payment_id = $2, version = version + 1, updated_at = $3 "
                 "WHERE id = $1 AND status = 'created' AND payment_id IS NULL",
                 "iii", (int64_t)p->order_id, (int64_t)p->id, p->created_at) != DB_DONE ||
         db_changes(db) != 1))
        return WRITE_CONFLICT; /* another payment took the order meanwhile */
    char id[ID_STR_MAX];
    id_format(p->id, "pay", id);
    resource_headers(req, &payment_resource, 201, id, 0);
    jsonw w;
    jw_init_answer(req, &w);
    write_new_payment(&w, p, "requires_capture");
    reply_jsonw(req, 201, &w);
    return write_result_of_db(event_record_reply(db, req, "payment.authorized", NULL));
}

static write_result record_payment(db_conn *db, void *arg)
{
    payment *p = arg;
    request *req = p->req;
    bool approved = p->charge.status == PROC_APPROVED;
    const char *status = !approved ? "failed" : p->manual ? "requires_capture" : "succeeded";
    write_result refused = approved && !p->manual ? credit_fits_or_refuse(db, p) : WRITE_OK;
    if (refused != WRITE_OK)
        return refused;
    bool held = approved && p->manual;
    if (held)
        p->capture_before = p->created_at + req->app->cfg.authorization_ttl_ms * 1000;
    /* the hold's amounts follow from the status (at most 16 parameters): a held payment's
     * amount is capturable, a succeeded one's captured */
    db_status rc = db_exec_checked(
        db, -1, 0,
        "INSERT INTO payments (id, user_id, account_id, amount, currency, status, source, "
        "order_id, description, metadata, refunded_amount, processor_charge_id, decline_code, "
        "created_at, capture_method, amount_capturable, amount_captured, capture_before) "
        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 0, $11, $12, $13, $14, "
        "CASE WHEN CAST($6 AS TEXT) = 'requires_capture' THEN CAST($4 AS BIGINT) ELSE 0 END, "
        "CASE WHEN CAST($6 AS TEXT) = 'succeeded' THEN CAST($4 AS BIGINT) ELSE 0 END, $15)",
        "iiiissszssssisz", (int64_t)p->id, (int64_t)req->user.id, (int64_t)p->account_id, p->amount,
        p->currency, status, p->source, (int64_t)p->order_id, p->description, p->metadata,
        p->charge.id, approved ? NULL : p->charge.decline_code, p->created_at,
        p->manual ? "manual" : "automatic", held ? p->capture_before : (int64_t)0);
    if (rc != DB_DONE)
        return write_result_of_db(
            rc); /* WRITE_CONFLICT: the caller finds out which (the order's, or an id's) */
    if (held)
        return record_authorization(db, p);
    if (approved) {
        /* the balance and the volume rollup (api/stats.c) move with the payment, at the
         * batch's commit: every payment of an account adds to the same rows */
        rc = account_credit_at_commit(db, p->account_id, p->amount, p->created_at);
        if (rc == DB_DONE)
            rc = stats_record_payment(db, p->account_id, p->created_at, p->amount);
        if (rc == DB_DONE) /* its journal entry (docs/ledger.md), in the same transaction */
            rc = ledger_post_charge(db, req->app, req->user.id, p->id, p->account_id, p->currency,
                                    p->amount);
        if (rc != DB_DONE)
            return write_result_of_db(rc); /* outside a batch they apply at once, and can fail */
        if (p->order_id &&
            (db_exec(db,
                     "UPDATE orders SET status = 'paid', payment_id = $2, version = version + 1, "
                     "updated_at = $3 WHERE id = $1 AND status = 'created'",
                     "iii", (int64_t)p->order_id, (int64_t)p->id, p->created_at) != DB_DONE ||
             db_changes(db) != 1))
            return WRITE_CONFLICT; /* the order left 'created' meanwhile */
        char id[ID_STR_MAX];
        id_format(p->id, "pay", id);
        resource_headers(req, &payment_resource, 201, id, 0);
        jsonw w;
        jw_init_answer(req, &w);
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
    return write_result_of_db(event_record_payment(db, req, approved, p->order_id));
}

/* What needs the database: 404s and the account's currency, before the key is claimed (on the
 * HTTP thread; the body itself was checked before, payment_fields). The order's own answers
 * (§5: paid, not payable) are stored with the key, so they come after the claim
 * (order_payable_or_reply). */
static bool read_payment_or_reply(request *req, payment *p)
{
    const payment_input *in = req->input;
    *p = (payment){.req = req,
                   .amount = in->amount,
                   .source = in->source,
                   .description = in->description,
                   .metadata = in->metadata,
                   .manual = in->capture_method && !strcmp(in->capture_method, "manual")};
    memcpy(p->currency, in->currency, sizeof p->currency);
    if (!source_of_mode_or_reply(req, in->source))
        return false;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return false;
    char account_currency[4];
    p->account_id = in->account.id;
    if (!p->account_id || !account_owned(db, req->user.id, p->account_id, account_currency)) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such account");
        return false;
    }
    if (strcmp(account_currency, p->currency) != 0) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "currency",
                            "currency must equal the account's currency");
        return false;
    }
    p->has_order = in->order.text != NULL;
    p->order_id = in->order.id;
    if (p->has_order && !p->order_id) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such order");
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

/* ---- a charge of ours that no payment will carry: voided inline under its own processor key;
 * if the processor does not confirm, queued so the recoverer retries it until it does ---- */

static step_result void_answered_step(request *req, void *arg)
{
    payment *p = arg;
    if (p->voided.status == PROC_APPROVED)
        return STEP_DONE;
    return idem_queue_charge_void_then(req, p->account_id, p->charge.id, p->amount);
}

static step_result void_hold(request *req, void *arg)
{
    payment *p = arg;
    STEP_MAY_BLOCK(req, void_hold, p); /* a release is a blocking call */
    p->voided = processor_release(request_processor(req), p->void_key, p->charge.id, p->amount);
    return void_answered_step(req, p);
}

static step_result void_charge(request *req, payment *p)
{
    if (p->charge.status != PROC_APPROVED)
        return STEP_DONE;
    snprintf(p->void_key, sizeof p->void_key, "%s:void", req->idem->processor_key);
    if (p->charge.authorized) {
        /* a hold no payment will carry: released, never refunded */
        return void_hold(req, p);
    }
    if (req->runner) {
        processor_refund_start(request_processor(req), p->void_key, p->charge.id, p->amount,
                               processor_answered,
                               processor_wait_for(req, &p->voided, void_answered_step, p));
        return STEP_WAITING;
    }
    p->voided = processor_refund(request_processor(req), p->void_key, p->charge.id, p->amount);
    return void_answered_step(req, p);
}

/* ---- the steps of a payment (request/step.h): claim → [order] → charge → record ---- */

/* After the payment's commit. The usual outcomes answer where the commit ended; the others
 * need reads, a processor call or another write, so a thread that may block. */
static step_result recorded(request *req, void *arg)
{
    payment *p = arg;
    write_result r = req->write_result;
    if (p->charge_in_write) {
        /* nothing kept means nothing charged: the charge was one of the job's writes; a
         * refusal took back a charge the job made, or left an earlier one to the recoverer
         * (charge_and_record). The charge this job made is counted once, approved or declined */
        if (r == WRITE_OK && (req->error == ERR_NONE || req->error == ERR_CARD_DECLINED))
            processor_count_charge_in_write(request_processor(req), p->charge, p->charge_created);
        if (r != WRITE_OK)
            reply_not_stored(req, r, "payment", "Idempotency-Key");
        return STEP_DONE;
    }
    bool over_limit = r == WRITE_REFUSED && req->error == ERR_BALANCE_LIMIT_EXCEEDED;
    if (r == WRITE_OK || (r == WRITE_REFUSED && !over_limit))
        return STEP_DONE;
    STEP_MAY_BLOCK(req, recorded, p);
    switch (r) {
    case WRITE_REFUSED:
        /* the balance cannot take it: nothing was recorded, so the charge must not stay */
        return void_charge(req, p);
    case WRITE_FENCED:
        /* We lost the key while we charged: the answer is already what the key holds. Our
         * charge is the new holder's too when it asks under the same processor key; the
         * recoverer checks that a record carries it and voids it otherwise. */
        if (p->charge.status == PROC_APPROVED)
            return idem_queue_charge_void_then(req, p->account_id, p->charge.id, p->amount);
        break;
    case WRITE_CONFLICT:
        if (order_taken_or_reply(req, p)) {
            /* The order was paid (or closed) by another request between our check and our
             * commit: this charge must not stay. */
            return void_charge(req, p);
        }
        /* not the order's (an id collision, a check): nothing was kept, the charge is
         * recorded by a retry under the same processor key */
        reply_not_stored(req, r, "payment", "Idempotency-Key");
        break;
    default: /* WRITE_RETRY, WRITE_FAILED: charged or not, the key stays resumable */
        reply_not_stored(req, r, "payment", "Idempotency-Key");
        break;
    }
    return STEP_DONE;
}

/* One commit for a local charge (docs/architecture.md): the key's claim (commit_response_then,
 * claim_in_write), the builtin processor's charge and the payment, in one job. Nothing can be
 * left in doubt between them, and the payment costs one job instead of three. A balance that
 * cannot take the payment refuses it as record_payment does; the charge this job made is then
 * taken back before anything saw it, and the refusal is stored with the key. */
static write_result charge_and_record(db_conn *db, void *arg)
{
    payment *p = arg;
    request *req = p->req;
    processor *proc = request_processor(req);
    write_result r =
        processor_charge_in_write(proc, db, req->idem->processor_key, p->amount, p->currency,
                                  p->source, &p->charge, &p->charge_created);
    if (r != WRITE_OK)
        return r;
    r = record_payment(db, p);
    if (r != WRITE_REFUSED || req->error != ERR_BALANCE_LIMIT_EXCEEDED)
        return r;
    if (p->charge_created)
        return processor_withdraw_in_write(proc, db, req->idem->processor_key);
    /* The charge is an earlier holder's (this claim took the key over): it must be voided at
     * the processor, which a job cannot do. The key is left in doubt, so the recoverer settles
     * it the long way (recorded: the void, then the refusal stored). */
    reply_header(req, "Retry-After", "1");
    reply_error(req, ERR_PROCESSOR_UNAVAILABLE,
                "an earlier attempt's charge is being voided; retry with the same Idempotency-Key");
    return WRITE_OK;
}

/* Whether this payment's charge can be made in its own write job: the builtin processor, a
 * card that answers at once, an automatic capture, no order (whose checks come between the
 * claim and the charge), and no fault a test placed on the steps this skips. */
static bool charges_in_write(request *req, const payment *p)
{
    return req->idem && !p->manual && !p->has_order &&
           processor_charges_in_write(request_processor(req), p->source) &&
           !fault_point_set("before-charge") && !fault_point_set("after-charge") &&
           !fault_point_set("crash-after-charge");
}

/* The payment, its account's credit, its events and the key's answer, in one commit. */
static step_result record(request *req, payment *p)
{
    if (!new_row_id_or_reply(req, &p->id, &p->created_at))
        return STEP_DONE;
    return commit_response_then(req, p->charge_in_write ? charge_and_record : record_payment, p,
                                recorded, p);
}

static step_result charged(request *req, void *arg)
{
    payment *p = arg;
    if (p->charge.status == PROC_UNAVAILABLE) {
        reply_processor_unavailable(req);
        return STEP_DONE;
    }
    if (fault_point_blocks("after-charge"))
        STEP_MAY_BLOCK(req, charged, p);
    fault_point("crash-after-charge");
    fault_point("after-charge");
    return record(req, p);
}

static step_result charge(request *req, void *arg)
{
    payment *p = arg;
    processor *proc = request_processor(req);
    if (p->manual) { /* §17: an authorization, on a thread that may block */
        STEP_MAY_BLOCK(req, charge, p);
        fault_point("before-charge");
        p->charge =
            processor_authorize(proc, req->idem->processor_key, p->amount, p->currency, p->source);
        return charged(req, p);
    }
    if (req->runner && !processor_charge_blocks(proc, p->source) &&
        !fault_point_blocks("before-charge")) {
        /* no thread waits: the builtin processor's commit, or the HTTP processor's answer on
         * its own thread, runs the next step */
        fault_point("before-charge");
        processor_charge_start(proc, req->idem->processor_key, p->amount, p->currency, p->source,
                               processor_answered, processor_wait_for(req, &p->charge, charged, p));
        return STEP_WAITING;
    }
    STEP_MAY_BLOCK(req, charge, p);
    fault_point("before-charge");
    p->charge = processor_charge(proc, req->idem->processor_key, p->amount, p->currency, p->source);
    return charged(req, p);
}

void payments_prepare(request *req)
{
    payment *p = arena_alloc(&req->arena, sizeof *p);
    if (!read_payment_or_reply(req, p))
        return;
    p->charge_in_write = charges_in_write(req, p);
    if (p->charge_in_write)
        req->idem->claim_in_write = true; /* the one job claims the key */
    req->prepared = p;
}

step_result payments_create(request *req, void *arg)
{
    payment *p = arg;
    if (p->charge_in_write)
        return record(req, p);
    if (p->has_order) {
        STEP_MAY_BLOCK(req, payments_create, p); /* reads */
        db_conn *db = reader_or_reply(req);
        if (!db || !order_payable_or_reply(req, db, p))
            return STEP_DONE;
    }
    return charge(req, p);
}

/* The recoverer's path: ask the processor what happened under this key; never charge. */
void payments_recover(request *req)
{
    payment p = {0};
    if (!read_payment_or_reply(req, &p))
        return;
    db_conn *db = p.has_order ? reader_or_reply(req) : NULL;
    if (p.has_order && (!db || !order_payable_or_reply(req, db, &p)))
        return;
    p.charge = processor_find_charge(request_processor(req), req->idem->processor_key);
    if (p.charge.status == PROC_NOT_FOUND)
        reply_error(req, ERR_RESOURCE_MISSING, "nothing was charged; the key is released");
    else if (p.charge.status == PROC_UNAVAILABLE)
        reply_processor_unavailable(req);
    else
        record(req, &p); /* no runner: the commit and its outcome happen here */
}

void payments_get(request *req)
{
    resource_get(req, &payment_resource);
}

static const list_query payments_list_query = {
    .name = "payments",
    .of = &payment_resource,
    .parent_column = "account_id",
    .status_column = "status",
    .time_column = "created_at",
    .id_bounds = true, /* created_at_of(id); partitioned by id on PostgreSQL */
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

/* Authorize now, capture later (docs/api.md §17, docs/payments.md): the capture and the cancel of
 * a manual payment's hold, and the recoverer's expiry of a hold past capture_before. Each is a
 * second operation on an existing payment, written as refunds are (api/refunds.c):
 *
 *   1. reserve (one write job): the payment's amounts move by one compare-and-set UPDATE (the
 *      amounts and the capture count read in the same job must still be the row's), so a
 *      capture racing a cancel, another capture or an expiry is decided here: at every commit
 *      amount_captured + amount_released + amount_capturable = amount, never more than 50
 *      captures, never past the hold. The account's books and the ledger move with it, and a
 *      payment_captures row is inserted 'pending' under the operation's processor key.
 *   2. the processor's capture or release under that processor key, which deduplicates on it,
 *      so a retried or resumed operation captures (or releases) once.
 *   3. confirm (one write job, with the key's stored answer): the row becomes 'succeeded', the
 *      events commit, and the payment is the answer.
 *
 * A processor that does not answer leaves the key in doubt with the row pending: a retry with
 * the same key (or the recoverer) finds the row by its processor key and goes on from step 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/captures.h"
#include "api/common.h"
#include "api/enums.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/ledger.h"
#include "api/stats.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "core/timefmt.h"
#include "idem/idem.h"
#include "node/fault.h"
#include "processor/processor.h"

#define PAYMENT_SELECT                                                                             \
    "SELECT id, account_id, amount, currency, status, source, order_id, description, metadata, "   \
    "refunded_amount, processor_charge_id, created_at, capture_method, amount_capturable, "        \
    "amount_captured, amount_released, capture_before, canceled_at, cancellation_reason "          \
    "FROM payments WHERE id = $1"

/* POST /v1/payments/{id}/capture and /cancel bodies */
typedef struct capture_input {
    int64_t amount; /* amount_to_capture; 0: all that is capturable */
    int final;      /* final_capture; -1 when absent: true */
} capture_input;

static const field capture_fields[] = {
    {.name = "amount_to_capture",
     .kind = KIND_INTEGER,
     IN(capture_input, amount),
     .min = 1,
     .max = MAX_AMOUNT},
    {.name = "final_capture", .kind = KIND_BOOLEAN, IN(capture_input, final), .absent = -1},
};
const schema captures_create_body = SCHEMA(capture_input, capture_fields);

typedef struct cancel_input {
    const char *reason;
} cancel_input;

static const field cancel_fields[] = {
    {.name = "cancellation_reason",
     .kind = KIND_ENUM,
     IN(cancel_input, reason),
     .values = cancellation_reasons},
};
const schema cancels_create_body = SCHEMA(cancel_input, cancel_fields);

/* ---- the pure part: what one capture or release does to a hold ---- */

hold_verdict hold_plan(const hold_state *h, hold_kind kind, int64_t want, bool final,
                       hold_change *out)
{
    *out = (hold_change){0};
    if (strcmp(h->status, "requires_capture") != 0 || h->capturable <= 0)
        return HOLD_NOT_CAPTURABLE;
    if (kind == HOLD_CAPTURE) {
        int64_t take = want > 0 ? want : h->capturable;
        if (take > h->capturable)
            return HOLD_EXCEEDS;
        if (h->capture_count >= MAX_CAPTURES)
            return HOLD_TOO_MANY;
        out->captured = take;
        out->released = final ? h->capturable - take : 0;
    } else {
        out->released = h->capturable;
    }
    int64_t left = h->capturable - out->captured - out->released;
    int64_t captured = h->captured + out->captured;
    out->capturable = left;
    out->status = left > 0                  ? "requires_capture"
                  : captured == 0           ? "canceled"
                  : h->refunded == 0        ? "succeeded"
                  : h->refunded >= captured ? "refunded"
                                            : "partially_refunded";
    return HOLD_OK;
}

/* ---- one operation on a hold ---- */

typedef struct hold_op {
    request *req;
    hold_kind kind;
    uint64_t id, payment_id, account_id, user_id;
    int64_t want; /* a capture's amount_to_capture; 0: all */
    bool final;
    const char *reason; /* a cancel's cancellation_reason */
    const char *processor_key;
    int64_t created_at;
    hold_change change; /* what the reserve moved (or, resumed, what the row says) */
    char currency[4], charge_id[64];
    char row_status[16]; /* the payment_captures row's, once it exists */
    proc_result processor;
} hold_op;

static const char *const kind_names[] = {"capture", "release", "expiry"};

static void reply_verdict(request *req, hold_verdict v, const hold_state *h)
{
    switch (v) {
    case HOLD_NOT_CAPTURABLE:
        reply_error_extra(req, ERR_PAYMENT_NOT_CAPTURABLE,
                          "only a payment that requires capture can be captured or canceled",
                          json_pack("{s:s}", "current_status", h->status));
        break;
    case HOLD_EXCEEDS:
        reply_error_extra(req, ERR_AMOUNT_EXCEEDS_CAPTURABLE,
                          "amount_to_capture exceeds what the hold has left",
                          json_pack("{s:I}", "amount_capturable", (json_int_t)h->capturable));
        break;
    case HOLD_TOO_MANY:
        reply_error(req, ERR_TOO_MANY_CAPTURES, "a payment takes at most 50 captures");
        break;
    case HOLD_OK:
        break;
    }
}

/* 1. reserve. Returns WRITE_OK with no answer set when it reserved (the processor is next),
 * WRITE_OK with the refusal as the answer, WRITE_RETRY when the row moved between its read and its
 * update (the store runs the job again), or the failure. */
static write_result reserve_hold(db_conn *db, void *arg)
{
    hold_op *op = arg;
    request *req = op->req;
    db_stmt *st = db_query(db,
                           "SELECT status, amount_capturable, amount_captured, amount_released, "
                           "capture_count, refunded_amount, order_id, account_id, currency, "
                           "created_at FROM payments WHERE id = $1",
                           "i", (int64_t)op->payment_id);
    db_status rc = db_step(st);
    hold_state h = {0};
    uint64_t order_id = 0;
    int64_t paid_at = 0;
    if (rc == DB_ROW) {
        snprintf(h.status, sizeof h.status, "%s", db_text(st, 0));
        h.capturable = db_int(st, 1);
        h.captured = db_int(st, 2);
        h.released = db_int(st, 3);
        h.capture_count = db_int(st, 4);
        h.refunded = db_int(st, 5);
        order_id = db_is_null(st, 6) ? 0 : (uint64_t)db_int(st, 6);
        op->account_id = (uint64_t)db_int(st, 7);
        snprintf(op->currency, sizeof op->currency, "%s", db_text(st, 8));
        paid_at = db_int(st, 9);
    }
    db_done(st);
    if (rc != DB_ROW)
        return rc == DB_DONE ? WRITE_FAILED
                             : write_result_of_db(rc); /* the payment was read before the claim */
    hold_verdict v = hold_plan(&h, op->kind == HOLD_CAPTURE ? HOLD_CAPTURE : HOLD_RELEASE, op->want,
                               op->final, &op->change);
    if (v != HOLD_OK) {
        if (req->idem) /* the client's answer; an expiry just finds the hold gone */
            reply_verdict(req, v, &h);
        return WRITE_OK;
    }
    hold_change *c = &op->change;
    bool canceling = op->kind != HOLD_CAPTURE;
    const char *reason = op->kind == HOLD_EXPIRY ? "expired" : op->reason;
    rc = db_exec(db,
                 "UPDATE payments SET amount_capturable = $2, "
                 "amount_captured = amount_captured + $3, amount_released = amount_released + $4, "
                 "capture_count = capture_count + $5, status = $6, "
                 "canceled_at = CASE WHEN CAST($7 AS BIGINT) = 1 THEN CAST($8 AS BIGINT) "
                 "ELSE canceled_at END, cancellation_reason = CASE WHEN CAST($7 AS BIGINT) = 1 "
                 "THEN CAST($9 AS TEXT) ELSE cancellation_reason END "
                 "WHERE id = $1 AND status = 'requires_capture' AND amount_capturable = $10 "
                 "AND capture_count = $11 AND amount_captured = $12 AND refunded_amount = $13",
                 "iiiiisiisiiii", (int64_t)op->payment_id, c->capturable, c->captured, c->released,
                 (int64_t)(c->captured > 0), c->status, (int64_t)canceling, op->created_at, reason,
                 h.capturable, h.capture_count, h.captured, h.refunded);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (db_changes(db) != 1)
        return WRITE_RETRY; /* another capture, cancel, expiry or refund moved it first: read again
                             */
    int64_t moved = c->captured + c->released;
    rc = db_exec(db,
                 "UPDATE accounts SET pending = pending - $2, version = version + 1, "
                 "updated_at = $3 WHERE id = $1 AND pending >= $2",
                 "iii", (int64_t)op->account_id, moved, op->created_at);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (db_changes(db) != 1)
        return WRITE_FAILED; /* the pending book lost what the hold holds: never paper over it */
    if (c->captured > 0) {
        rc = account_credit_at_commit(db, op->account_id, c->captured, op->created_at);
        if (rc == DB_DONE) /* the volume rollup counts what was taken, under the payment's hour */
            rc = stats_record_capture(db, op->account_id, paid_at, c->captured, h.captured == 0);
        if (rc == DB_DONE)
            rc = ledger_post_capture(db, req->app, op->user_id, op->payment_id, op->account_id,
                                     op->currency, c->captured);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
    }
    if (c->released > 0 &&
        (rc = ledger_post_release(db, req->app, op->user_id, op->payment_id, op->account_id,
                                  op->currency, c->released)) != DB_DONE)
        return write_result_of_db(rc);
    rc = db_exec(db,
                 "INSERT INTO payment_captures (id, user_id, payment_id, kind, amount, released, "
                 "status, processor_key, created_at) VALUES ($1, $2, $3, $4, $5, $6, 'pending', "
                 "$7, $8)",
                 "iiisiisi", (int64_t)op->id, (int64_t)op->user_id, (int64_t)op->payment_id,
                 kind_names[op->kind], c->captured, c->released, op->processor_key, op->created_at);
    if (rc != DB_DONE || !order_id)
        return write_result_of_db(rc);
    /* §17: the order is paid at the first capture, and free again when the payment is
     * canceled with nothing captured */
    if (c->captured > 0 && h.captured == 0)
        rc = db_exec(db,
                     "UPDATE orders SET status = 'paid', version = version + 1, updated_at = $3 "
                     "WHERE id = $1 AND payment_id = $2 AND status = 'created'",
                     "iii", (int64_t)order_id, (int64_t)op->payment_id, op->created_at);
    else if (!strcmp(c->status, "canceled"))
        rc = db_exec(db,
                     "UPDATE orders SET payment_id = NULL, version = version + 1, updated_at = $3 "
                     "WHERE id = $1 AND payment_id = $2 AND status = 'created'",
                     "iii", (int64_t)order_id, (int64_t)op->payment_id, op->created_at);
    else
        return WRITE_OK;
    if (rc == DB_DONE && db_changes(db) == 1 && c->captured > 0)
        rc = event_record_order(db, req, order_id);
    return write_result_of_db(rc);
}

/* The payment as it is now, as JSON text (malloc'd), with `extra` members added; NULL when
 * unreadable. */
static char *payment_text(db_conn *db, uint64_t payment_id, json_t *extra)
{
    db_stmt *st = db_query(db, PAYMENT_SELECT, "i", (int64_t)payment_id);
    char *text = NULL;
    if (db_step(st) == DB_ROW) {
        jsonw w;
        jw_init(&w);
        payment_write_row(st, &w);
        text = jw_take(&w, NULL);
    }
    db_done(st);
    if (text && extra) {
        json_t *j = json_loads(text, 0, NULL);
        free(text);
        json_object_update(j, extra);
        text = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(j);
    }
    json_decref(extra);
    return text;
}

/* 3. confirm: the row succeeded at the processor; the events and (for a client) the answer. */
static write_result confirm_hold(db_conn *db, void *arg)
{
    hold_op *op = arg;
    request *req = op->req;
    db_status rc = db_exec(db,
                           "UPDATE payment_captures SET status = 'succeeded', processor_id = $2 "
                           "WHERE id = $1 AND status = 'pending'",
                           "is", (int64_t)op->id, op->processor.id);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    bool first = db_changes(db) == 1; /* an expiry confirmed twice (two nodes) records once */
    if (req->idem) {
        db_stmt *st = db_query(db, PAYMENT_SELECT, "i", (int64_t)op->payment_id);
        if (db_step(st) != DB_ROW) {
            db_done(st);
            return WRITE_FAILED;
        }
        resource_reply(req, &payment_resource, st, 200);
        db_done(st);
    }
    if (!first && !req->idem)
        return WRITE_OK;
    const hold_change *c = &op->change;
    if (c->captured > 0) { /* one event per capture, with its amount */
        char *text =
            payment_text(db, op->payment_id,
                         json_pack("{s:{s:I, s:I}}", "capture", "amount", (json_int_t)c->captured,
                                   "amount_released", (json_int_t)c->released));
        rc = text ? event_record(db, req, "payment.captured", text) : DB_ERROR;
        free(text);
    } else {
        char *text = payment_text(db, op->payment_id, NULL);
        rc = text ? event_record(db, req, "payment.canceled", text) : DB_ERROR;
        free(text);
    }
    return write_result_of_db(rc);
}

/* The operation this processor key reserved before, if any (a retry, a resume, or the
 * expiry of a hold whose release was left in doubt). */
static bool reserved_hold(db_conn *db, hold_op *op)
{
    db_stmt *st = db_query(db,
                           "SELECT id, amount, released, status, created_at FROM payment_captures "
                           "WHERE processor_key = $1 AND payment_id = $2",
                           "si", op->processor_key, (int64_t)op->payment_id);
    bool found = db_step(st) == DB_ROW;
    if (found) {
        op->id = (uint64_t)db_int(st, 0);
        op->change.captured = db_int(st, 1);
        op->change.released = db_int(st, 2);
        snprintf(op->row_status, sizeof op->row_status, "%s", db_text(st, 3));
        op->created_at = db_int(st, 4);
    }
    db_done(st);
    return found;
}

/* 2. the processor's part (blocking). */
static proc_result hold_at_processor(const hold_op *op)
{
    processor *proc = request_processor(op->req); /* a test hold is the builtin processor's */
    if (op->change.captured > 0)
        return processor_capture(proc, op->processor_key, op->charge_id, op->change.captured,
                                 op->change.released);
    return processor_release(proc, op->processor_key, op->charge_id, op->change.released);
}

static void reply_in_doubt(request *req, const hold_op *op)
{
    if (op->processor.status == PROC_DECLINED || op->processor.status == PROC_NOT_FOUND) {
        /* the processor's hold disagrees with ours: never answered as done, logged for a
         * human (payd ledger verify lists it too) */
        jsonw w;
        log_begin(&w, "error", "the processor refused a capture or release payd reserved");
        jw_key(&w, "payment_id");
        jw_int(&w, (int64_t)op->payment_id);
        jw_key(&w, "charge_id");
        jw_string(&w, op->charge_id);
        log_end(&w);
    }
    reply_header(req, "Retry-After", "1");
    reply_error(req, ERR_PROCESSOR_UNAVAILABLE,
                "the processor did not confirm; retry with the same Idempotency-Key");
}

static step_result confirmed(request *req, void *arg)
{
    hold_op *op = arg;
    write_result w = req->write_result;
    if (w != WRITE_OK && w != WRITE_FENCED) /* fenced: the answer is what the key holds */
        reply_in_doubt(req, op);
    return STEP_DONE;
}

static step_result at_processor(request *req, void *arg)
{
    hold_op *op = arg;
    STEP_MAY_BLOCK(req, at_processor, op);
    fault_point("before-capture");
    op->processor = hold_at_processor(op);
    fault_point("after-capture");
    if (op->processor.status != PROC_APPROVED) {
        reply_in_doubt(req, op);
        return STEP_DONE;
    }
    return commit_response_then(req, confirm_hold, op, confirmed, op);
}

static step_result reserved(request *req, void *arg)
{
    hold_op *op = arg;
    write_result w = req->write_result;
    if (w == WRITE_REFUSED || w == WRITE_FENCED || (w == WRITE_OK && req->status))
        return STEP_DONE; /* refused, or the key moved on: the answer is set */
    if (w != WRITE_OK) {
        reply_not_stored(req, w, "capture", "Idempotency-Key");
        return STEP_DONE;
    }
    return at_processor(req, op);
}

/* ---- the client's operations ---- */

/* The payment in the path, if it is the caller's (else 404: nothing happened, key released). */
static bool hold_request_or_reply(request *req, hold_op *op)
{
    op->req = req;
    op->user_id = req->user.id;
    if (!path_id_or_reply(req, 0, "pay", &op->payment_id))
        return false;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return false;
    db_stmt *st = db_query(db,
                           "SELECT account_id, processor_charge_id, currency FROM payments "
                           "WHERE id = $1 AND user_id = $2",
                           "ii", (int64_t)op->payment_id, (int64_t)req->user.id);
    bool found = db_step(st) == DB_ROW;
    if (found) {
        op->account_id = (uint64_t)db_int(st, 0);
        snprintf(op->charge_id, sizeof op->charge_id, "%s", db_text(st, 1) ? db_text(st, 1) : "");
        snprintf(op->currency, sizeof op->currency, "%s", db_text(st, 2));
    } else {
        reply_error(req, ERR_RESOURCE_MISSING, "no such payment");
    }
    db_done(st);
    return found;
}

static hold_op *capture_op(request *req)
{
    hold_op *op = arena_alloc(&req->arena, sizeof *op); /* zeroed */
    const capture_input *in = req->input;
    op->kind = HOLD_CAPTURE;
    op->want = in->amount;
    op->final = in->final != 0; /* absent (-1): true */
    return hold_request_or_reply(req, op) ? op : NULL;
}

static hold_op *cancel_op(request *req)
{
    hold_op *op = arena_alloc(&req->arena, sizeof *op);
    const cancel_input *in = req->input;
    op->kind = HOLD_RELEASE;
    op->reason = in->reason;
    return hold_request_or_reply(req, op) ? op : NULL;
}

void captures_prepare(request *req)
{
    req->prepared = capture_op(req);
}

void cancels_prepare(request *req)
{
    req->prepared = cancel_op(req);
}

/* After the claim: an operation this key reserved before goes on; a new one is reserved. */
static step_result hold_create(request *req, void *prepared)
{
    hold_op *op = prepared;
    op->processor_key = req->idem->processor_key;
    if (req->idem->resumed) {
        STEP_MAY_BLOCK(req, hold_create, op); /* a read */
        db_conn *db = reader_or_reply(req);
        if (!db)
            return STEP_DONE;
        if (reserved_hold(db, op)) {
            if (strcmp(op->row_status, "pending") != 0) { /* done: the payment is the answer */
                db_stmt *st = db_query(db, PAYMENT_SELECT, "i", (int64_t)op->payment_id);
                if (db_step(st) == DB_ROW)
                    resource_reply(req, &payment_resource, st, 200);
                db_done(st);
                return STEP_DONE;
            }
            return at_processor(req, op);
        }
    }
    if (!new_row_id_or_reply(req, &op->id, &op->created_at))
        return STEP_DONE;
    return commit_response_then(req, reserve_hold, op, reserved, op);
}

step_result captures_create(request *req, void *prepared)
{
    return hold_create(req, prepared);
}

step_result cancels_create(request *req, void *prepared)
{
    return hold_create(req, prepared);
}

/* The recoverer's path: finish what this claim reserved; never start an operation for a client
 * that is gone (nothing reached the processor before the reservation, so releasing is exact). */
static void hold_recover(request *req, hold_op *op)
{
    if (!op)
        return;
    op->processor_key = req->idem->processor_key;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    if (reserved_hold(db, op)) {
        if (!strcmp(op->row_status, "pending")) {
            at_processor(req, op);
            return;
        }
        db_stmt *st = db_query(db, PAYMENT_SELECT, "i", (int64_t)op->payment_id);
        if (db_step(st) == DB_ROW)
            resource_reply(req, &payment_resource, st, 200);
        db_done(st);
        return;
    }
    reply_error(req, ERR_RESOURCE_MISSING, "nothing was captured or released; the key is released");
}

void captures_recover(request *req)
{
    hold_recover(req, capture_op(req));
}

void cancels_recover(request *req)
{
    hold_recover(req, cancel_op(req));
}

/* ---- expiry: holds past capture_before ---- */

typedef struct due_hold {
    int64_t payment_id, user_id;
    bool test; /* a test-mode payment: its hold is the builtin processor's (docs/modes.md) */
    char charge_id[64];
} due_hold;

/* One hold: reserve its release under the payment's own expiry key (one per payment, so two
 * nodes, or a pass after a lost answer, reserve it once and ask the processor with one key),
 * release it at the processor, confirm. A capture or a cancel that got there first leaves
 * nothing to reserve. False when the processor did not answer. */
static bool expire_one(app *a, const due_hold *d, bool *expired)
{
    request *req = calloc(1, sizeof *req);
    arena_init(&req->arena);
    req->app = a;
    req->user.id = (uint64_t)d->user_id;
    req->user.test = d->test;
    snprintf(req->request_id, sizeof req->request_id, "expiry_%lld", (long long)d->payment_id);
    char key[48];
    snprintf(key, sizeof key, "expiry:%lld", (long long)d->payment_id);
    hold_op op = {.req = req,
                  .kind = HOLD_EXPIRY,
                  .payment_id = (uint64_t)d->payment_id,
                  .user_id = (uint64_t)d->user_id,
                  .processor_key = key};
    snprintf(op.charge_id, sizeof op.charge_id, "%s", d->charge_id);
    bool answered = true;
    *expired = false;
    db_conn *db = store_reader(a->store);
    bool found = db && reserved_hold(db, &op);
    store_thread_done(a->store);
    if (!found) {
        if (!app_try_next_id(a, &op.id)) {
            request_free(req);
            return true;
        }
        op.created_at = now_us();
        if (store_write(a->store, reserve_hold, &op) != WRITE_OK || op.change.released == 0) {
            request_free(req);
            return true; /* captured or canceled first, or the database failed: next pass */
        }
    } else if (strcmp(op.row_status, "pending") != 0) {
        request_free(req);
        return true;
    }
    op.processor = hold_at_processor(&op);
    if (op.processor.status == PROC_APPROVED) {
        *expired = store_write(a->store, confirm_hold, &op) == WRITE_OK;
    } else {
        answered = op.processor.status != PROC_UNAVAILABLE;
        jsonw w;
        log_begin(&w, "warn", "hold expiry not confirmed by the processor; retried next pass");
        jw_key(&w, "payment_id");
        jw_int(&w, d->payment_id);
        log_end(&w);
    }
    request_free(req);
    return answered;
}

int captures_expire_due(app *a)
{
    db_conn *db = store_reader(a->store);
    if (!db)
        return 0;
    due_hold due[100];
    int n = 0;
    /* the holds past their time, and those whose expiry is still pending at the processor */
    db_stmt *st = db_query(db,
                           "SELECT p.id, p.user_id, p.processor_charge_id, u.mode FROM payments p "
                           "JOIN users u ON u.id = p.user_id "
                           "WHERE p.status = 'requires_capture' AND p.capture_before < $1 "
                           "UNION SELECT p.id, p.user_id, p.processor_charge_id, u.mode FROM "
                           "payment_captures c JOIN payments p ON p.id = c.payment_id "
                           "JOIN users u ON u.id = p.user_id "
                           "WHERE c.kind = 'expiry' AND c.status = 'pending' LIMIT 100",
                           "i", now_us());
    while (n < 100 && db_step(st) == DB_ROW) {
        due[n].payment_id = db_int(st, 0);
        due[n].user_id = db_int(st, 1);
        snprintf(due[n].charge_id, sizeof due[n].charge_id, "%s",
                 db_text(st, 2) ? db_text(st, 2) : "");
        due[n].test = db_text(st, 3) && !strcmp(db_text(st, 3), "test");
        n++;
    }
    db_done(st);
    store_thread_done(a->store);
    int expired = 0;
    for (int i = 0; i < n; i++) {
        bool done = false;
        if (!expire_one(a, &due[i], &done))
            break; /* the processor is not answering: the rest wait for the next pass */
        expired += done;
    }
    return expired;
}

/* Refunds (§6). Money leaves through the processor only after the refund holds it here:
 *
 *   1. reserve (one write job): the payment's refunded_amount grows by one conditional UPDATE
 *      (`refunded_amount + a <= amount`), the account is debited by another (`balance >= a`),
 *      the refund row is inserted as 'pending' under the claim's processor key, and a payment
 *      refunded in full moves its order to 'refunded'. Racing refunds are decided here, so they
 *      never sum past the payment and the losers never reach the processor.
 *   2. the processor's refund with the claim's processor key, outside any job and holding no
 *      thread: the builtin processor's record commits, or the HTTP processor answers.
 *   3. confirm (one write job, with the key's stored answer): the refund becomes 'succeeded'.
 *
 * Written as steps (request/step.h): the payment is read before the key is claimed (prepare);
 * no thread waits for either write job's commit.
 *
 * If the processor does not answer, the key is left in doubt with the refund pending: a retry
 * with the same key (or the recoverer) finds the pending refund by its processor key and goes on
 * from step 2; the processor deduplicates on the key, so money moves once. */
#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/enums.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/ledger.h"
#include "api/pagination.h"
#include "api/stats.h"
#include "core/timefmt.h"
#include "idem/idem.h"
#include "node/fault.h"
#include "processor/processor.h"

#define REFUND_COLUMNS "id, payment_id, amount, reason, status, created_at"

static void write_refund_row(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "re", (uint64_t)db_int(st, 0));
    jw_member_object(w, "refund");
    jw_member_id(w, "payment_id", "pay", (uint64_t)db_int(st, 1));
    jw_member_int(w, "amount", db_int(st, 2));
    jw_member_string(w, "reason", db_text(st, 3));
    jw_member_string(w, "status", db_text(st, 4));
    jw_member_time(w, "created_at", db_int(st, 5));
    jw_object_end(w);
}

/* Refunds are read through their payment's list: the contract gives a 201 no Location. */
static const resource refund_resource = {
    .noun = "refund",
    RESOURCE_TABLE("refunds", REFUND_COLUMNS, "user_id"),
    .id_prefix = "re",
    .write_row = write_refund_row,
};

/* POST /v1/payments/{id}/refunds (§6) */
typedef struct refund_input {
    int64_t amount; /* 0: all that is left */
    const char *reason;
} refund_input;

static const field refund_fields[] = {
    AMOUNT_FIELD(refund_input, amount, false),
    {.name = "reason", .kind = KIND_ENUM, IN(refund_input, reason), .values = refund_reasons},
};
const schema refunds_create_body = SCHEMA(refund_input, refund_fields);

typedef struct refund {
    request *req;
    uint64_t id, payment_id, account_id;
    int64_t amount, created_at;
    const char *reason;
    char status[24]; /* the refund's, once it exists */
    char charge_id[64];
    char currency[4]; /* the payment's */
    proc_result processor;
} refund;

static void reply_exceeds(request *req, int64_t refundable)
{
    reply_error_extra(req, ERR_AMOUNT_EXCEEDS_REFUNDABLE,
                      refundable > 0 ? "the amount exceeds what is left to refund"
                                     : "the payment is already refunded in full",
                      json_pack("{s:I}", "refundable_amount", (json_int_t)refundable));
}

static void reply_in_doubt(request *req)
{
    reply_header(req, "Retry-After", "1");
    reply_error(req, ERR_PROCESSOR_UNAVAILABLE,
                "the processor did not confirm the refund; retry with the same Idempotency-Key");
}

/* ---- 1. reserve ---- */

static write_result reserve_refund(db_conn *db, void *arg)
{
    refund *r = arg;
    request *req = r->req;
    db_status rc =
        db_exec(db,
                "UPDATE payments SET refunded_amount = refunded_amount + $2, "
                "status = CASE WHEN status = 'requires_capture' THEN status "
                "WHEN refunded_amount + $2 = amount_captured THEN 'refunded' "
                "ELSE 'partially_refunded' END "
                "WHERE id = $1 AND status <> 'failed' AND refunded_amount + $2 <= amount_captured",
                "ii", (int64_t)r->payment_id, r->amount);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (db_changes(db) == 0) {
        /* another refund took what was left first; nothing was written */
        db_stmt *st =
            db_query(db, "SELECT amount_captured - refunded_amount FROM payments WHERE id = $1",
                     "i", (int64_t)r->payment_id);
        reply_exceeds(req, db_step(st) == DB_ROW ? db_int(st, 0) : 0);
        db_done(st);
        return WRITE_OK;
    }
    rc = db_exec(db,
                 "UPDATE accounts SET balance = balance - $2, version = version + 1, "
                 "updated_at = $3 WHERE id = $1 AND balance >= $2",
                 "iii", (int64_t)r->account_id, r->amount, r->created_at);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (db_changes(db) == 0) {
        reply_error(req, ERR_INSUFFICIENT_FUNDS, "the account balance cannot cover the refund");
        return WRITE_REFUSED; /* the savepoint is undone; the engine stores the answer */
    }
    if ((rc = stats_record_refund(db, r->payment_id, r->amount)) != DB_DONE)
        return write_result_of_db(
            rc); /* the volume rollup (api/stats.c) moves with the refunded amount */
    /* the journal entry (docs/ledger.md) of the debit just made */
    if ((rc = ledger_post_refund(db, req->app, req->user.id, r->id, r->account_id, r->currency,
                                 r->amount)) != DB_DONE)
        return write_result_of_db(rc);
    rc = db_exec(db,
                 "INSERT INTO refunds (id, user_id, payment_id, amount, reason, status, "
                 "created_at, processor_key) VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7)",
                 "iiiisis", (int64_t)r->id, (int64_t)req->user.id, (int64_t)r->payment_id,
                 r->amount, r->reason, r->created_at, req->idem->processor_key);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    /* a payment refunded in full takes its order with it (§6) */
    rc = db_exec(db,
                 "UPDATE orders SET status = 'refunded', version = version + 1, updated_at = $2 "
                 "WHERE id = (SELECT order_id FROM payments WHERE id = $1 "
                 "AND refunded_amount = amount_captured AND status = 'refunded') "
                 "AND status IN ('paid', 'shipped', 'completed')",
                 "ii", (int64_t)r->payment_id, r->created_at);
    /* §15: the order's event commits with its change */
    return write_result_of_db(rc != DB_DONE ? rc
                                            : event_record_refunded_order(db, req, r->payment_id));
}

/* ---- 2 and 3: the processor, then confirm ---- */

static write_result confirm_refund(db_conn *db, void *arg)
{
    refund *r = arg;
    db_status rc = db_exec(db,
                           "UPDATE refunds SET status = 'succeeded', processor_refund_id = $2 "
                           "WHERE id = $1 AND status = 'pending'",
                           "is", (int64_t)r->id, r->processor.id);
    if (rc == DB_DONE)
        rc = resource_created(r->req, &refund_resource,
                              db_query(db, "SELECT " REFUND_COLUMNS " FROM refunds WHERE id = $1",
                                       "i", (int64_t)r->id),
                              NULL);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    /* §15: the event commits with the refund's success */
    return write_result_of_db(event_record_reply(db, r->req, "refund.succeeded", NULL));
}

static step_result confirmed(request *req, void *arg)
{
    (void)arg;
    write_result w = req->write_result;
    if (w != WRITE_OK && w != WRITE_FENCED) /* fenced: the answer is what the key holds */
        reply_in_doubt(req);
    return STEP_DONE;
}

/* The processor's answer: the confirm as a step, or the refund left in doubt. */
static step_result refund_answered(request *req, void *arg)
{
    refund *r = arg;
    if (fault_point_blocks("after-refund"))
        STEP_MAY_BLOCK(req, refund_answered, r);
    /* The protocol answers a refund with success or not at all: anything else is in doubt, and
     * the refund stays pending (its money held) until a retry or the recoverer confirms it. */
    fault_point("after-refund");
    if (r->processor.status != PROC_APPROVED) {
        reply_in_doubt(req);
        return STEP_DONE;
    }
    return commit_response_then(req, confirm_refund, r, confirmed, r);
}

/* The processor's part, started: the builtin processor's refund record's commit, or an HTTP
 * processor's answer on its client's thread, runs the next step. Without a runner (the
 * recoverer) the call blocks. */
static step_result refund_at_processor(request *req, void *arg)
{
    refund *r = arg;
    processor *proc = request_processor(req);
    if (req->runner) {
        processor_refund_start(proc, req->idem->processor_key, r->charge_id, r->amount,
                               processor_answered,
                               processor_wait_for(req, &r->processor, refund_answered, r));
        return STEP_WAITING;
    }
    r->processor = processor_refund(proc, req->idem->processor_key, r->charge_id, r->amount);
    return refund_answered(req, r);
}

/* Goes on with a refund this claim reserved earlier: confirm it (reserved_refund answered one
 * that succeeded already). */
static step_result resume_refund(request *req, refund *r)
{
    if (strcmp(r->status, "pending") != 0)
        return STEP_DONE;
    return refund_at_processor(req, r);
}

/* ---- validation ---- */

typedef struct payment_row {
    int64_t amount, refunded, balance; /* amount: what was captured (§17); balance: the
                                        * account's, read in the same snapshot */
    char status[24];
} payment_row;

/* The payment in the path, if it is the caller's (else 404: nothing happened, key released). */
static bool payment_or_reply(request *req, db_conn *db, refund *r, payment_row *p)
{
    if (!path_id_or_reply(req, 0, "pay", &r->payment_id))
        return false;
    /* one statement, so the payment and the balance come from one snapshot: a refund that
     * just took both is seen as having taken both */
    db_stmt *st = db_query(db,
                           "SELECT p.account_id, p.amount_captured, p.refunded_amount, p.status, "
                           "p.processor_charge_id, a.balance, p.currency FROM payments p "
                           "JOIN accounts a ON a.id = p.account_id "
                           "WHERE p.id = $1 AND p.user_id = $2",
                           "ii", (int64_t)r->payment_id, (int64_t)req->user.id);
    bool found = db_step(st) == DB_ROW;
    if (found) {
        r->account_id = (uint64_t)db_int(st, 0);
        p->amount = db_int(st, 1);
        p->refunded = db_int(st, 2);
        snprintf(p->status, sizeof p->status, "%s", db_text(st, 3));
        snprintf(r->charge_id, sizeof r->charge_id, "%s", db_text(st, 4) ? db_text(st, 4) : "");
        p->balance = db_int(st, 5);
        snprintf(r->currency, sizeof r->currency, "%s", db_text(st, 6));
    } else {
        reply_error(req, ERR_RESOURCE_MISSING, "no such payment");
    }
    db_done(st);
    return found;
}

/* The refund this claim already reserved, if a retry (or the recoverer) resumed the claim
 * after the processor went quiet. A fresh claim has a processor key no refund carries yet. One
 * that succeeded already is answered here, from its row. */
static bool reserved_refund(request *req, db_conn *db, refund *r)
{
    db_stmt *st = db_query(db,
                           "SELECT " REFUND_COLUMNS " FROM refunds "
                           "WHERE processor_key = $1 AND payment_id = $2",
                           "si", req->idem->processor_key, (int64_t)r->payment_id);
    bool found = db_step(st) == DB_ROW;
    if (found) {
        r->id = (uint64_t)db_int(st, 0);
        r->amount = db_int(st, 2);
        r->reason = db_text(st, 3) ? arena_strdup(&req->arena, db_text(st, 3)) : NULL;
        snprintf(r->status, sizeof r->status, "%s", db_text(st, 4));
        r->created_at = db_int(st, 5);
        if (strcmp(r->status, "pending") != 0)
            resource_reply(req, &refund_resource, st, 201);
    }
    db_done(st);
    return found;
}

/* Business refusals seen before anything moves (stored as the key's answer). The reserve job
 * checks the same conditions again atomically: these only spare it the obvious cases. */
static bool refundable_or_reply(request *req, refund *r, const payment_row *p)
{
    int64_t left = p->amount - p->refunded;
    if (!strcmp(p->status, "failed")) {
        reply_error(req, ERR_PAYMENT_NOT_REFUNDABLE, "a failed payment cannot be refunded");
        return false;
    }
    if (r->amount == 0)
        r->amount = left; /* default: all that is left */
    if (left <= 0 || r->amount > left) {
        reply_exceeds(req, left);
        return false;
    }
    if (p->balance < r->amount) {
        reply_error(req, ERR_INSUFFICIENT_FUNDS, "the account balance cannot cover the refund");
        return false;
    }
    return true;
}

/* ---- handlers ---- */

/* The body and the payment it refunds, shared by the client's path and the recoverer's; NULL
 * once an answer (400/404) is set. */
static db_conn *refund_request_or_reply(request *req, refund *r, payment_row *p)
{
    const refund_input *in = req->input;
    r->req = req;
    r->amount = in->amount;
    r->reason = in->reason;
    db_conn *db = reader_or_reply(req);
    return db && payment_or_reply(req, db, r, p) ? db : NULL;
}

/* A refund between its steps: the payment as prepare read it travels with it. */
typedef struct refund_request {
    refund r;
    payment_row payment;
} refund_request;

/* Before the key is claimed (on the HTTP thread): the payment, or 404 with no key written. */
void refunds_prepare(request *req)
{
    refund_request *rr = arena_alloc(&req->arena, sizeof *rr); /* zeroed */
    if (refund_request_or_reply(req, &rr->r, &rr->payment))
        req->prepared = rr;
}

/* A refund just reserved goes to the processor. */
static step_result reserved_at_processor(request *req, void *arg)
{
    if (fault_point_blocks("before-refund"))
        STEP_MAY_BLOCK(req, reserved_at_processor, arg);
    fault_point("before-refund");
    return refund_at_processor(req, arg);
}

static step_result reserved(request *req, void *arg)
{
    refund *r = arg;
    write_result w = req->write_result;
    if (w == WRITE_REFUSED || w == WRITE_FENCED || (w == WRITE_OK && req->status))
        return STEP_DONE; /* refused, or the key moved on: the answer is set */
    if (w != WRITE_OK) {
        /* nothing was reserved and nothing reached the processor; a retry reserves afresh */
        reply_not_stored(req, w, "refund", "Idempotency-Key");
        return STEP_DONE;
    }
    return reserved_at_processor(req, r);
}

/* After the claim: a refund this key reserved before goes on; a new one is reserved. */
step_result refunds_create(request *req, void *prepared)
{
    refund_request *rr = prepared;
    refund *r = &rr->r;
    if (req->idem->resumed) {
        STEP_MAY_BLOCK(req, refunds_create, rr); /* a read */
        db_conn *db = reader_or_reply(req);
        if (!db)
            return STEP_DONE;
        if (reserved_refund(req, db, r))
            return resume_refund(req, r);
    }
    if (!refundable_or_reply(req, r, &rr->payment))
        return STEP_DONE;
    if (!new_row_id_or_reply(req, &r->id, &r->created_at))
        return STEP_DONE;
    return commit_response_then(req, reserve_refund, r, reserved, r);
}

/* The recoverer's path: finish a refund this claim reserved; never start one for a client that
 * is gone (nothing reached the processor before the reservation, so releasing is exact). With
 * no runner every step below runs here, in turn. */
void refunds_recover(request *req)
{
    refund r = {0};
    payment_row p;
    db_conn *db = refund_request_or_reply(req, &r, &p);
    if (!db)
        return;
    if (reserved_refund(req, db, &r))
        resume_refund(req, &r);
    else
        reply_error(req, ERR_RESOURCE_MISSING, "nothing was refunded; the key is released");
}

static const list_query refunds_list_query = {
    .name = "refunds",
    .of = &refund_resource,
    .parent_column = "payment_id",
};

void refunds_list(request *req)
{
    uint64_t payment;
    if (!path_id_or_reply(req, 0, "pay", &payment))
        return;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    db_stmt *st = db_query(db, "SELECT 1 FROM payments WHERE id = $1 AND user_id = $2", "ii",
                           (int64_t)payment, (int64_t)req->user.id);
    bool owned = db_step(st) == DB_ROW;
    db_done(st);
    if (owned)
        list_page(req, &refunds_list_query, payment, NULL);
    else
        reply_error(req, ERR_RESOURCE_MISSING, "no such payment");
}

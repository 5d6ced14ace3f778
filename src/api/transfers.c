/* Transfers (§7): the flow table. `biz_seq` is the caller's own dedupe key, and the transfer
 * row is its record: one write job inserts the row (the unique index on (user, biz_seq)
 * decides who is first, never a check-then-insert), debits with a conditional UPDATE
 * (`balance >= amount`: no balance goes negative, whatever races), credits, and stores the
 * answer on the row. The row, both balance changes and the answer commit together, so a
 * transfer is either recorded with its answer or did not happen; a repeat replays the answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/common.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/ledger.h"
#include "api/pagination.h"
#include "core/canonical.h"
#include "core/log.h"
#include "core/timefmt.h"

/* The columns of a transfer, each after `t` (the list joins the legs, which share names). */
#define TRANSFER_COLUMNS_OF(t)                                                                     \
    t "id, " t "biz_seq, " t "from_account, " t "to_account, " t "amount, " t "currency, " t       \
      "status, " t "created_at"
#define TRANSFER_COLUMNS TRANSFER_COLUMNS_OF("")

static void write_transfer_row(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "tr", (uint64_t)db_int(st, 0));
    jw_member_object(w, "transfer");
    jw_member_string(w, "biz_seq", db_text(st, 1));
    jw_member_id(w, "from_account", "acct", (uint64_t)db_int(st, 2));
    jw_member_id(w, "to_account", "acct", (uint64_t)db_int(st, 3));
    jw_member_int(w, "amount", db_int(st, 4));
    jw_member_string(w, "currency", db_text(st, 5));
    jw_member_string(w, "status", db_text(st, 6));
    jw_member_time(w, "created_at", db_int(st, 7));
    jw_object_end(w);
}

const resource transfer_resource = {
    .noun = "transfer",
    RESOURCE_TABLE("transfers", TRANSFER_COLUMNS, "user_id"),
    .id_prefix = "tr",
    .path = "/v1/transfers/",
    .write_row = write_transfer_row,
};

/* POST /v1/transfers (§7) */
typedef struct transfer_input {
    const char *biz_seq, *description;
    input_id from, to;
    int64_t amount;
    char currency[4];
} transfer_input;

static const field transfer_fields[] = {
    {.name = "biz_seq",
     .kind = KIND_STRING,
     .required = true,
     IN(transfer_input, biz_seq),
     .min = 1,
     .max = 64},
    {.name = "from_account",
     .kind = KIND_ID,
     .required = true,
     IN(transfer_input, from),
     .prefix = "acct"},
    {.name = "to_account",
     .kind = KIND_ID,
     .required = true,
     IN(transfer_input, to),
     .prefix = "acct"},
    AMOUNT_FIELD(transfer_input, amount, true),
    CURRENCY_FIELD(transfer_input, currency),
    DESCRIPTION_FIELD(transfer_input, description, 500),
};
const schema transfers_create_body = SCHEMA(transfer_input, transfer_fields);

typedef struct transfer {
    request *req;
    uint64_t id, from, to;
    int64_t amount, created_at;
    char currency[4];
    const char *biz_seq, *description;
    char fingerprint[65];
} transfer;

/* biz_seq seen before: the same request gets its recorded answer again, another one 422. */
static db_status replay_or_reused(db_conn *db, transfer *t)
{
    request *req = t->req;
    db_stmt *st = db_query(db,
                           "SELECT id, fingerprint, response_status, response_body FROM transfers "
                           "WHERE user_id = $1 AND biz_seq = $2",
                           "is", (int64_t)req->user.id, t->biz_seq);
    if (db_step(st) != DB_ROW) {
        db_done(st);
        return DB_BUSY; /* PostgreSQL: the winner rolled back after our insert waited; again */
    }
    if (strcmp(db_text(st, 1), t->fingerprint) != 0) {
        reply_error(req, ERR_BIZ_SEQ_REUSED, "this biz_seq was used with a different request");
    } else {
        int status = (int)db_int(st, 2);
        const char *body = db_text(st, 3);
        reply_raw(req, status, body, strlen(body));
        char id[ID_STR_MAX];
        id_format((uint64_t)db_int(st, 0), "tr", id);
        resource_headers(req, &transfer_resource, status, id, 0);
        reply_header(req, "Idempotent-Replayed", "true");
    }
    db_done(st);
    return DB_DONE;
}

static db_status add_legs(db_conn *db, const transfer *t)
{
    db_status rc = db_exec(db,
                           "INSERT INTO transfer_legs (account_id, created_at, transfer_id) "
                           "VALUES ($1, $3, $4), ($2, $3, $4)",
                           "iiii", (int64_t)t->from, (int64_t)t->to, t->created_at, (int64_t)t->id);
    return rc;
}

/* A transfer refused for its balance: the row says failed and holds the refusal (req's answer)
 * for replays, and its event carries the row as it is now. */
static db_status fail_transfer(db_conn *db, const transfer *t)
{
    request *req = t->req;
    db_stmt *st = db_query(db,
                           "UPDATE transfers SET status = 'failed', response_status = $2, "
                           "response_body = $3 WHERE id = $1 RETURNING " TRANSFER_COLUMNS,
                           "iis", (int64_t)t->id, (int64_t)req->status, req->resp_body);
    db_status rc = db_step(st);
    char *failed = NULL;
    if (rc == DB_ROW) {
        jsonw w;
        jw_init(&w);
        write_transfer_row(st, &w);
        failed = jw_take(&w, NULL);
    }
    db_done(st);
    if (rc == DB_ROW)
        rc = add_legs(db, t);
    else if (rc == DB_DONE)
        rc = DB_ERROR; /* the row this job inserted is gone */
    /* §15: the event commits with the failed transfer */
    if (rc == DB_DONE)
        rc = event_record(db, req, "transfer.failed", failed);
    free(failed);
    return rc;
}

/* Moves amount into the destination; version_step undoes a credit's version bump with it. */
static db_status credit(db_conn *db, const transfer *t, int64_t amount, int64_t version_step)
{
    return db_exec(db,
                   "UPDATE accounts SET balance = balance + $2, version = version + $4, "
                   "updated_at = $3 WHERE id = $1",
                   "iiii", (int64_t)t->to, amount, t->created_at, version_step);
}

static write_result run_transfer(db_conn *db, void *arg)
{
    transfer *t = arg;
    request *req = t->req;
    /* The row goes in first, as succeeded, and is the answer; the index decides whether we own
     * this biz_seq. The answer is stored on the row once the money moved. */
    bool seen;
    db_status rc = resource_created(
        req, &transfer_resource,
        db_query(db,
                 "INSERT INTO transfers (id, user_id, biz_seq, fingerprint, from_account, "
                 "to_account, amount, currency, description, status, response_status, "
                 "response_body, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
                 "'succeeded', 201, '', $10) ON CONFLICT (user_id, biz_seq) DO NOTHING "
                 "RETURNING " TRANSFER_COLUMNS,
                 "iissiiissi", (int64_t)t->id, (int64_t)req->user.id, t->biz_seq, t->fingerprint,
                 (int64_t)t->from, (int64_t)t->to, t->amount, t->currency, t->description,
                 t->created_at),
        &seen);
    if (rc != DB_DONE || seen)
        return write_result_of_db(rc != DB_DONE ? rc : replay_or_reused(db, t));
    /* Rows are locked in id order, so two transfers between the same accounts in opposite
     * directions never wait on each other (on PostgreSQL they would deadlock). When the credited
     * account comes first, a refused debit undoes its credit in this same transaction. */
    bool fits = false;
    if ((rc = account_credit_fits(db, t->to, t->amount, &fits)) != DB_DONE)
        return write_result_of_db(rc);
    if (!fits) {
        /* recorded as failed, balances untouched, as a debit the balance cannot cover */
        reply_error(req, ERR_BALANCE_LIMIT_EXCEEDED,
                    "the destination account's balance cannot take this amount");
        return write_result_of_db(fail_transfer(db, t));
    }
    bool credit_first = t->to < t->from;
    if (credit_first && (rc = credit(db, t, t->amount, 1)) != DB_DONE)
        return write_result_of_db(rc);
    rc = db_exec(db,
                 "UPDATE accounts SET balance = balance - $3, version = version + 1, "
                 "updated_at = $4 WHERE id = $1 AND user_id = $2 AND balance >= $3",
                 "iiii", (int64_t)t->from, (int64_t)req->user.id, t->amount, t->created_at);
    if (rc == DB_DONE && db_changes(db) == 0) {
        /* recorded as failed, balances untouched: the same biz_seq replays this answer */
        if (credit_first && (rc = credit(db, t, -t->amount, -1)) != DB_DONE)
            return write_result_of_db(rc);
        reply_error(req, ERR_INSUFFICIENT_FUNDS, "the source account's balance is too low");
        return write_result_of_db(fail_transfer(db, t));
    }
    if (rc == DB_DONE && !credit_first)
        rc = credit(db, t, t->amount, 1);
    if (rc == DB_DONE)
        rc = add_legs(db, t);
    if (rc == DB_DONE) /* the journal entry (docs/ledger.md) of both moves */
        rc = ledger_post_transfer(db, req->app, req->user.id, t->id, t->from, t->to, t->currency,
                                  t->amount);
    if (rc == DB_DONE)
        rc = (db_status)db_exec_checked(db, 1, DB_ERROR,
                                        "UPDATE transfers SET response_body = $2 WHERE id = $1",
                                        "is", (int64_t)t->id, req->resp_body);
    /* §15: the event commits with the transfer */
    return write_result_of_db(
        rc != DB_DONE ? rc : event_record_reply(db, req, "transfer.succeeded", NULL));
}

/* The rest of validation (prepare, on the HTTP thread): 400 and 404 answers, not recorded, so a
 * corrected request may use the biz_seq. */
static bool read_transfer_or_reply(request *req, transfer *t)
{
    const transfer_input *in = req->input;
    t->req = req;
    t->biz_seq = in->biz_seq;
    t->description = in->description;
    t->amount = in->amount;
    memcpy(t->currency, in->currency, sizeof t->currency);
    if (!strcmp(in->from.text, in->to.text)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "to_account",
                            "a transfer needs two different accounts");
        return false;
    }
    db_conn *db = reader_or_reply(req);
    if (!db)
        return false;
    t->from = in->from.id;
    t->to = in->to.id;
    uint64_t ids[2] = {t->from, t->to};
    for (int i = 0; i < 2; i++) {
        char currency[4];
        if (!ids[i] || !account_owned(db, req->user.id, ids[i], currency)) {
            reply_error(req, ERR_RESOURCE_MISSING, "no such account");
            return false;
        }
        if (strcmp(currency, t->currency) != 0) {
            reply_invalid_param(req, ERR_INVALID_PARAMETER, "currency",
                                "currency must equal both accounts' currency");
            return false;
        }
    }
    char *canonical = json_canonical(req->json);
    request_fingerprint(req->method, req->path, canonical, t->fingerprint);
    free(canonical);
    return true;
}

void transfers_prepare(request *req)
{
    transfer *t = arena_alloc(&req->arena, sizeof *t); /* zeroed */
    if (read_transfer_or_reply(req, t))
        req->prepared = t;
}

static step_result transferred(request *req, void *arg)
{
    (void)arg;
    write_result w = req->write_result;
    if (w != WRITE_OK) {
        /* nothing was kept: the same biz_seq runs the transfer once when retried */
        jsonw line;
        log_begin_request(&line, "error", "write job failed", req->request_id);
        jw_key(&line, "route");
        jw_string(&line, "transfers.create");
        jw_key(&line, "result");
        jw_string(&line, write_result_name(w));
        log_end(&line);
        reply_not_stored(req, w, "transfer", "biz_seq");
    }
    return STEP_DONE;
}

/* The row, both balances, the legs, the event and the answer: one write job. */
step_result transfers_create(request *req, void *prepared)
{
    transfer *t = prepared;
    if (!new_row_id_or_reply(req, &t->id, &t->created_at))
        return STEP_DONE;
    return request_write_then(req, run_transfer, t, transferred);
}

void transfers_get(request *req)
{
    resource_get(req, &transfer_resource);
}

void transfers_get_by_biz_seq(request *req)
{
    db_conn *db = reader_or_reply(req);
    if (db)
        resource_answer_get(req, &transfer_resource,
                            db_query(db,
                                     "SELECT " TRANSFER_COLUMNS
                                     " FROM transfers WHERE user_id = $1 AND "
                                     "biz_seq = $2",
                                     "is", (int64_t)req->user.id, req->params[0]));
}

/* Both directions: one leg row per account a transfer touches, one range scan per page. */
static const list_query account_transfers_query = {
    .name = "account_transfers",
    /* the leg's sort key after the transfer's own columns: the page is read in its order */
    .select = "SELECT " TRANSFER_COLUMNS_OF("t.") ", l.created_at, l.transfer_id FROM "
                                                  "transfer_legs l JOIN transfers t ON t.id = "
                                                  "l.transfer_id",
    .parent_column = "l.account_id",
    .created_column = "l.created_at",
    .id_column = "l.transfer_id",
    .write_row = write_transfer_row,
};

void transfers_list(request *req)
{
    uint64_t account;
    if (path_account_or_reply(req, 0, &account))
        list_page(req, &account_transfers_query, account, NULL);
}

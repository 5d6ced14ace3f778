/* Transfers (§7): the flow table. `biz_seq` is the caller's own dedupe key, and the transfer
 * row is its record: one write job inserts the row (the unique index on (user, biz_seq)
 * decides who is first, never a check-then-insert), debits with a conditional UPDATE
 * (`balance >= amount`: no balance goes negative, whatever races), credits, and stores the
 * answer on the row. The row, both balance changes and the answer commit together, so a
 * transfer is either recorded with its answer or did not happen; a repeat replays the answer. */
#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/canonical.h"
#include "core/log.h"
#include "core/timefmt.h"

#define TRANSFER_COLUMNS                                                                           \
    "t.id, t.biz_seq, t.from_account, t.to_account, t.amount, t.currency, t.status, t.created_at"

json_t *transfer_json(db_stmt *st)
{
    return json_pack("{s:o, s:s, s:s, s:o, s:o, s:I, s:s, s:s, s:o}", "id",
                     json_id("tr", (uint64_t)db_int(st, 0)), "object", "transfer", "biz_seq",
                     db_text(st, 1), "from_account", json_id("acct", (uint64_t)db_int(st, 2)),
                     "to_account", json_id("acct", (uint64_t)db_int(st, 3)), "amount",
                     (json_int_t)db_int(st, 4), "currency", db_text(st, 5), "status",
                     db_text(st, 6), "created_at", json_time(db_int(st, 7)));
}

typedef struct transfer {
    request *req;
    uint64_t id, from, to;
    int64_t amount, created_at;
    char currency[4];
    const char *biz_seq, *description;
    char fingerprint[65];
} transfer;

static json_t *new_transfer_json(const transfer *t, const char *status)
{
    return json_pack("{s:o, s:s, s:s, s:o, s:o, s:I, s:s, s:s, s:o}", "id", json_id("tr", t->id),
                     "object", "transfer", "biz_seq", t->biz_seq, "from_account",
                     json_id("acct", t->from), "to_account", json_id("acct", t->to), "amount",
                     (json_int_t)t->amount, "currency", t->currency, "status", status, "created_at",
                     json_time(t->created_at));
}

static void set_location(request *req, uint64_t id)
{
    char location[64], s[ID_STR_MAX];
    id_format(id, "tr", s);
    snprintf(location, sizeof location, "/v1/transfers/%s", s);
    reply_header(req, "Location", location);
}

/* biz_seq seen before: the same request gets its recorded answer again, another one 422. */
static int replay_or_reused(db_conn *db, transfer *t)
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
        if (status == 201)
            set_location(req, (uint64_t)db_int(st, 0));
        reply_header(req, "Idempotent-Replayed", "true");
    }
    db_done(st);
    return 0;
}

static int add_legs(db_conn *db, const transfer *t)
{
    db_status rc = db_exec(db,
                           "INSERT INTO transfer_legs (account_id, created_at, transfer_id) "
                           "VALUES ($1, $3, $4), ($2, $3, $4)",
                           "iiii", (int64_t)t->from, (int64_t)t->to, t->created_at, (int64_t)t->id);
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

static int run_transfer(db_conn *db, void *arg)
{
    transfer *t = arg;
    request *req = t->req;
    /* The row goes in first, carrying the success answer; the index decides whether we own
     * this biz_seq. */
    json_t *ok = new_transfer_json(t, "succeeded");
    char *ok_body = json_dumps(ok, JSON_COMPACT | JSON_PRESERVE_ORDER);
    db_status rc =
        db_exec(db,
                "INSERT INTO transfers (id, user_id, biz_seq, fingerprint, from_account, "
                "to_account, amount, currency, description, status, response_status, "
                "response_body, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
                "'succeeded', 201, $10, $11) ON CONFLICT (user_id, biz_seq) DO NOTHING",
                "iissiiisssi", (int64_t)t->id, (int64_t)req->user.id, t->biz_seq, t->fingerprint,
                (int64_t)t->from, (int64_t)t->to, t->amount, t->currency, t->description, ok_body,
                t->created_at);
    free(ok_body);
    if (rc != DB_DONE || db_changes(db) == 0) {
        json_decref(ok);
        return rc != DB_DONE ? rc : replay_or_reused(db, t);
    }
    /* Rows are locked in id order, so two transfers between the same accounts in opposite
     * directions never wait on each other (on PostgreSQL they would deadlock). When the credited
     * account comes first, a refused debit undoes its credit in this same transaction. */
    bool credit_first = t->to < t->from;
    if (credit_first && (rc = credit(db, t, t->amount, 1)) != DB_DONE) {
        json_decref(ok);
        return rc;
    }
    rc = db_exec(db,
                 "UPDATE accounts SET balance = balance - $3, version = version + 1, "
                 "updated_at = $4 WHERE id = $1 AND user_id = $2 AND balance >= $3",
                 "iiii", (int64_t)t->from, (int64_t)req->user.id, t->amount, t->created_at);
    if (rc == DB_DONE && db_changes(db) == 0) {
        /* recorded as failed, balances untouched: the same biz_seq replays this answer */
        json_decref(ok);
        if (credit_first && (rc = credit(db, t, -t->amount, -1)) != DB_DONE)
            return rc;
        reply_error(req, ERR_INSUFFICIENT_FUNDS, "the source account's balance is too low");
        rc = db_exec(db,
                     "UPDATE transfers SET status = 'failed', response_status = $2, "
                     "response_body = $3 WHERE id = $1",
                     "iis", (int64_t)t->id, (int64_t)req->status, req->resp_body);
        if (rc == DB_DONE)
            rc = add_legs(db, t);
        /* §15: the event commits with the failed transfer */
        return rc != DB_DONE
                   ? rc
                   : event_record_json(db, req, "transfer.failed", new_transfer_json(t, "failed"));
    }
    if (rc == DB_DONE && !credit_first)
        rc = credit(db, t, t->amount, 1);
    if (rc == DB_DONE)
        rc = add_legs(db, t);
    if (rc != DB_DONE) {
        json_decref(ok);
        return rc;
    }
    set_location(req, t->id);
    reply_json(req, 201, ok);
    /* §15: the event commits with the transfer */
    return event_record_reply(db, req, "transfer.succeeded", NULL);
}

/* Validation: 400 and 404 answers, not recorded, so a corrected request may use the biz_seq. */
static bool read_transfer_or_reply(request *req, transfer *t)
{
    static const body_field fields[] = {
        {"biz_seq", FIELD_STRING, true, 1, 64},    {"from_account", FIELD_STRING, true, 1, 64},
        {"to_account", FIELD_STRING, true, 1, 64}, {"amount", FIELD_INTEGER, true, 1, MAX_AMOUNT},
        {"currency", FIELD_STRING, true, 3, 3},    {"description", FIELD_STRING, false, 0, 500},
    };
    if (!CHECK_BODY_OR_REPLY(req, fields))
        return false;
    t->req = req;
    t->biz_seq = body_string(req, "biz_seq");
    t->description = body_string(req, "description");
    t->amount = body_int(req, "amount", 0);
    if (!normalize_currency(body_string(req, "currency"), t->currency)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "currency", "currency must be 3 letters");
        return false;
    }
    if (!strcmp(body_string(req, "from_account"), body_string(req, "to_account"))) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "to_account",
                            "a transfer needs two different accounts");
        return false;
    }
    db_conn *db = reader_or_reply(req);
    if (!db)
        return false;
    const char *names[2] = {"from_account", "to_account"};
    uint64_t *ids[2] = {&t->from, &t->to};
    for (int i = 0; i < 2; i++) {
        char currency[4];
        if (id_parse(body_string(req, names[i]), "acct", ids[i]) != 0 ||
            !account_owned(db, req->user.id, *ids[i], currency)) {
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

void transfers_create(request *req)
{
    transfer t = {0};
    if (!read_transfer_or_reply(req, &t))
        return;
    t.id = app_next_id(req->app);
    t.created_at = created_at_of(t.id);
    write_result w = store_run(req->app->store, run_transfer, &t);
    if (w != WRITE_OK) {
        /* nothing was kept: the same biz_seq runs the transfer once when retried */
        jsonw line;
        log_begin_request(&line, "error", "write job failed", req->request_id);
        jw_key(&line, "route");
        jw_string(&line, "transfers.create");
        jw_key(&line, "result");
        jw_string(&line, write_result_name(w));
        log_end(&line);
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_DATABASE_UNAVAILABLE,
                    "the transfer could not be stored; retry with the same biz_seq");
    }
}

static void reply_transfer(request *req, db_stmt *st)
{
    if (db_step(st) == DB_ROW)
        reply_json(req, 200, transfer_json(st));
    else
        reply_error(req, ERR_RESOURCE_MISSING, "no such transfer");
    db_done(st);
}

void transfers_get(request *req)
{
    uint64_t id;
    if (!path_id_or_reply(req, 0, "tr", &id))
        return;
    db_conn *db = reader_or_reply(req);
    if (db)
        reply_transfer(req, db_query(db,
                                     "SELECT " TRANSFER_COLUMNS
                                     " FROM transfers t WHERE t.id = $1 AND t.user_id = $2",
                                     "ii", (int64_t)id, (int64_t)req->user.id));
}

void transfers_get_by_biz_seq(request *req)
{
    db_conn *db = reader_or_reply(req);
    if (db)
        reply_transfer(req, db_query(db,
                                     "SELECT " TRANSFER_COLUMNS
                                     " FROM transfers t WHERE t.user_id = $1 AND t.biz_seq = $2",
                                     "is", (int64_t)req->user.id, req->params[0]));
}

/* Both directions: one leg row per account a transfer touches, one range scan per page. */
static const list_query account_transfers_query = {
    .name = "account_transfers",
    .select = "SELECT " TRANSFER_COLUMNS " FROM transfer_legs l JOIN transfers t "
              "ON t.id = l.transfer_id",
    .parent_column = "l.account_id",
    .created_column = "l.created_at",
    .id_column = "l.transfer_id",
    .created_index = 7,
    .id_index = 0,
    .to_json = transfer_json,
};

void transfers_list(request *req)
{
    uint64_t account;
    if (path_account_or_reply(req, 0, &account))
        list_page(req, &account_transfers_query, account, NULL);
}

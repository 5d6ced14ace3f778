/* The ledger (docs/ledger.md): journal entries written by the write job of the change that
 * moves money, and the routes that read them: an account's balance, and its balance
 * transactions, one per line of an entry that touches a payd account. */
#include "api/ledger.h"

#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/jsonw.h"

static const char *const book_names[] = {"available", "pending", "processor", "holds"};

const char *ledger_book_name(ledger_book b)
{
    return book_names[b];
}

bool ledger_number(ledger_entry *e, app *a)
{
    /* in a write job: ids only if they are ready now (a lapsed lease must not hold the writer,
     * events.c says why); the caller's transaction then fails as unavailable */
    if (!app_try_next_id(a, &e->id))
        return false;
    for (int i = 0; i < e->count; i++)
        if (!app_try_next_id(a, &e->line[i].id))
            return false;
    return true;
}

/* Whether the lines sum to zero, without overflowing on the way. */
static bool lines_balance(const ledger_entry *e)
{
    int64_t sum = 0;
    for (int i = 0; i < e->count; i++)
        if (__builtin_add_overflow(sum, e->line[i].amount, &sum))
            return false;
    return sum == 0;
}

db_status ledger_post(db_conn *db, const ledger_entry *e)
{
    if (e->count < 2 || e->count > LEDGER_MAX_LINES || !lines_balance(e))
        return DB_ERROR;
    db_status rc = db_exec(db,
                           "INSERT INTO journal_entries (id, user_id, type, source_id, currency, "
                           "created_at) VALUES ($1, $2, $3, $4, $5, $6)",
                           "iisisi", (int64_t)e->id, (int64_t)e->user, e->type, (int64_t)e->source,
                           e->currency, created_at_of(e->id));
    /* On PostgreSQL the lines two to a statement (a statement takes at most 16 parameters; $1..$4
     * are the entry's, then six per line), a round trip each. On SQLite one line to a statement:
     * a statement that writes two rows opens a statement journal, a copy of every page it is
     * first to touch, which cost more than a second statement. */
    int per_statement = db_kind_of(db) == DB_POSTGRES ? 2 : 1;
#define LINE_COLUMNS                                                                               \
    "INSERT INTO journal_lines (entry_id, user_id, type, source_id, id, account_id, book, "        \
    "currency, amount, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
    static const char *const lines_sql[] = {
        NULL, LINE_COLUMNS, LINE_COLUMNS ", ($1, $2, $3, $4, $11, $12, $13, $14, $15, $16)"};
#undef LINE_COLUMNS
    for (int first = 0; rc == DB_DONE && first < e->count; first += per_statement) {
        db_value params[4 + 6 * 2] = {
            {.type = 'i', .i = (int64_t)e->id},
            {.type = 'i', .i = (int64_t)e->user},
            {.type = 's', .s = e->type},
            {.type = 'i', .i = (int64_t)e->source},
        };
        int n = 4;
        for (int i = first; i < e->count && i < first + per_statement; i++) {
            const ledger_line *l = &e->line[i];
            params[n++] = (db_value){.type = 'i', .i = (int64_t)l->id};
            params[n++] = l->account ? (db_value){.type = 'i', .i = (int64_t)l->account}
                                     : (db_value){.type = 'n'};
            params[n++] = (db_value){.type = 's', .s = book_names[l->book]};
            params[n++] = (db_value){.type = 's', .s = e->currency};
            params[n++] = (db_value){.type = 'i', .i = l->amount};
            params[n++] = (db_value){.type = 'i', .i = created_at_of(l->id)};
        }
        db_stmt *st = db_query_values(db, lines_sql[(n - 4) / 6], params, n);
        rc = db_step(st);
        db_done(st);
    }
    return rc;
}

/* Numbers the entry and posts it; an entry that names no line count has two. */
static db_status post_entry(db_conn *db, app *a, ledger_entry *e)
{
    if (!e->count)
        e->count = 2;
    if (!ledger_number(e, a)) {
        db_note_failure(DB_FAILURE_UNAVAILABLE);
        return DB_ERROR;
    }
    return ledger_post(db, e);
}

db_status ledger_post_charge(db_conn *db, app *a, uint64_t user, uint64_t payment, uint64_t account,
                             const char *currency, int64_t amount)
{
    ledger_entry e = {.user = user,
                      .source = payment,
                      .type = "charge",
                      .currency = currency,
                      .line = {{.account = account, .book = BOOK_AVAILABLE, .amount = amount},
                               {.book = BOOK_PROCESSOR, .amount = -amount}}};
    return post_entry(db, a, &e);
}

db_status ledger_post_refund(db_conn *db, app *a, uint64_t user, uint64_t refund, uint64_t account,
                             const char *currency, int64_t amount)
{
    ledger_entry e = {.user = user,
                      .source = refund,
                      .type = "refund",
                      .currency = currency,
                      .line = {{.account = account, .book = BOOK_AVAILABLE, .amount = -amount},
                               {.book = BOOK_PROCESSOR, .amount = amount}}};
    return post_entry(db, a, &e);
}

db_status ledger_post_transfer(db_conn *db, app *a, uint64_t user, uint64_t transfer, uint64_t from,
                               uint64_t to, const char *currency, int64_t amount)
{
    ledger_entry e = {.user = user,
                      .source = transfer,
                      .type = "transfer",
                      .currency = currency,
                      .line = {{.account = from, .book = BOOK_AVAILABLE, .amount = -amount},
                               {.account = to, .book = BOOK_AVAILABLE, .amount = amount}}};
    return post_entry(db, a, &e);
}

/* §17: a hold and what becomes of it; the source of each is the payment */
db_status ledger_post_authorization(db_conn *db, app *a, uint64_t user, uint64_t payment,
                                    uint64_t account, const char *currency, int64_t amount)
{
    ledger_entry e = {.user = user,
                      .source = payment,
                      .type = "authorization",
                      .currency = currency,
                      .line = {{.account = account, .book = BOOK_PENDING, .amount = amount},
                               {.book = BOOK_HOLDS, .amount = -amount}}};
    return post_entry(db, a, &e);
}

db_status ledger_post_capture(db_conn *db, app *a, uint64_t user, uint64_t payment,
                              uint64_t account, const char *currency, int64_t amount)
{
    ledger_entry e = {.user = user,
                      .source = payment,
                      .type = "capture",
                      .currency = currency,
                      .count = 4,
                      .line = {{.account = account, .book = BOOK_PENDING, .amount = -amount},
                               {.book = BOOK_HOLDS, .amount = amount},
                               {.account = account, .book = BOOK_AVAILABLE, .amount = amount},
                               {.book = BOOK_PROCESSOR, .amount = -amount}}};
    return post_entry(db, a, &e);
}

db_status ledger_post_release(db_conn *db, app *a, uint64_t user, uint64_t payment,
                              uint64_t account, const char *currency, int64_t amount)
{
    ledger_entry e = {.user = user,
                      .source = payment,
                      .type = "release",
                      .currency = currency,
                      .line = {{.account = account, .book = BOOK_PENDING, .amount = -amount},
                               {.book = BOOK_HOLDS, .amount = amount}}};
    return post_entry(db, a, &e);
}

/* ---- GET /v1/accounts/{id}/balance ---- */

void accounts_balance(request *req)
{
    uint64_t account;
    if (!path_account_or_reply(req, 0, &account))
        return;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    db_stmt *st = db_query(db,
                           "SELECT balance, pending, currency FROM accounts "
                           "WHERE id = $1 AND user_id = $2",
                           "ii", (int64_t)account, (int64_t)req->user.id);
    if (db_step(st) == DB_ROW) {
        jsonw w;
        jw_init_answer(req, &w);
        jw_object_begin(&w);
        jw_member_object(&w, "balance");
        jw_member_int(&w, "available", db_int(st, 0));
        jw_member_int(&w, "pending", db_int(st, 1));
        jw_member_string(&w, "currency", db_text(st, 2));
        jw_object_end(&w);
        reply_jsonw(req, 200, &w);
    } else {
        reply_error(req, ERR_RESOURCE_MISSING, "no such account");
    }
    db_done(st);
}

/* ---- balance transactions ---- */

#define TXN_COLUMNS "id, account_id, amount, currency, type, source_id, entry_id, created_at"

/* The prefix of an entry's source, by the entry's type. */
static const char *source_prefix(const char *type)
{
    if (!strcmp(type, "refund"))
        return "re";
    if (!strcmp(type, "transfer"))
        return "tr";
    return "pay"; /* charge, authorization, capture, release */
}

static void write_txn_row(db_stmt *st, jsonw *w)
{
    const char *type = db_text(st, 4);
    jw_object_begin(w);
    jw_member_id(w, "id", "txn", (uint64_t)db_int(st, 0));
    jw_member_object(w, "balance_transaction");
    jw_member_id(w, "account_id", "acct", (uint64_t)db_int(st, 1));
    jw_member_int(w, "amount", db_int(st, 2));
    jw_member_string(w, "currency", db_text(st, 3));
    jw_member_string(w, "type", type);
    jw_member_id(w, "source", source_prefix(type), (uint64_t)db_int(st, 5));
    jw_member_id(w, "entry_id", "je", (uint64_t)db_int(st, 6));
    jw_member_time(w, "created_at", db_int(st, 7));
    jw_object_end(w);
}

/* Only lines on a payd account are balance transactions (the partial indexes' condition). */
static const resource txn_resource = {
    .noun = "balance_transaction",
    .table = "journal_lines",
    .columns = TXN_COLUMNS,
    .owner = "user_id",
    .get_sql = "SELECT " TXN_COLUMNS " FROM journal_lines WHERE id = $1 AND user_id = $2 "
               "AND account_id IS NOT NULL",
    .id_prefix = "txn",
    .write_row = write_txn_row,
};

void balance_transactions_get(request *req)
{
    resource_get(req, &txn_resource);
}

/* The caller's balance transactions, and one account's: the same list with another parent. */
#define TXN_LIST(list_name, parent)                                                                \
    {                                                                                              \
        .name = list_name, .of = &txn_resource, .parent_column = parent,                           \
        .condition = "account_id IS NOT NULL", .status_column = "type", .status_param = "type",    \
        .time_column = "created_at", .source_column = "source_id",                                 \
    }
static const list_query user_txns_query = TXN_LIST("balance_transactions", "user_id");
static const list_query account_txns_query = TXN_LIST("account_balance_transactions", "account_id");

/* source names a payment, a refund or a transfer; anything else is a bad filter */
static bool source_filter_ok(const char *source)
{
    static const char *const prefixes[] = {"pay", "re", "tr"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        uint64_t id;
        if (id_parse(source, prefixes[i], &id) == 0)
            return true;
    }
    return false;
}

void balance_transactions_list(request *req)
{
    const list_params *f = req->input;
    if (f->source && !source_filter_ok(f->source)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "source",
                            "source must be a payment, refund or transfer id");
        return;
    }
    if (!f->account.text) {
        list_page(req, &user_txns_query, req->user.id, NULL);
        return;
    }
    if (!f->account.id) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "account_id",
                            "account_id must be an account id such as acct_03b4473zr0000");
        return;
    }
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    if (!account_owned(db, req->user.id, f->account.id, NULL)) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such account");
        return;
    }
    list_page(req, &account_txns_query, f->account.id, NULL);
}

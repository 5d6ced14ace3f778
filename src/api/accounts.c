/* Accounts (§3): create, get (with ETag), list. The balance is only ever moved by payments,
 * refunds and transfers, inside their own transactions. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/events.h"
#include "idem/idem.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/timefmt.h"

#define ACCOUNT_COLUMNS "id, currency, name, balance, version, created_at"

json_t *account_json(db_stmt *st)
{
    return json_pack("{s:o, s:s, s:s, s:o, s:I, s:I, s:o}", "id",
                     json_id("acct", (uint64_t)db_int(st, 0)), "object", "account", "currency",
                     db_text(st, 1), "name", json_string_or_null(db_text(st, 2)), "balance",
                     (json_int_t)db_int(st, 3), "version", (json_int_t)db_int(st, 4), "created_at",
                     json_time(db_int(st, 5)));
}

typedef struct new_account {
    request *req;
    uint64_t id;
    char currency[4];
    const char *name;
    int64_t now;
} new_account;

static int insert_account(db_conn *db, void *arg)
{
    new_account *n = arg;
    if (db_exec(db,
                "INSERT INTO accounts (id, user_id, currency, name, balance, version, created_at, "
                "updated_at) VALUES ($1, $2, $3, $4, 0, 1, $5, $5)",
                "iissi", (int64_t)n->id, (int64_t)n->req->user.id, n->currency, n->name,
                n->now) != DB_DONE)
        return -1;
    json_t *body =
        json_pack("{s:o, s:s, s:s, s:o, s:i, s:i, s:o}", "id", json_id("acct", n->id), "object",
                  "account", "currency", n->currency, "name", json_string_or_null(n->name),
                  "balance", 0, "version", 1, "created_at", json_time(n->now));
    char location[64];
    snprintf(location, sizeof location, "/v1/accounts/%s",
             json_string_value(json_object_get(body, "id")));
    reply_header(n->req, "Location", location);
    reply_header(n->req, "ETag", "\"v1\"");
    reply_json(n->req, 201, body);
    /* §15: the event commits with the account */
    return event_record_reply(db, n->req, "account.created", NULL);
}

void accounts_create(request *req)
{
    static const body_field fields[] = {
        {"currency", FIELD_STRING, true, 3, 3},
        {"name", FIELD_STRING, false, 0, 100},
    };
    if (!CHECK_BODY_OR_REPLY(req, fields))
        return;
    new_account n = {.req = req, .name = body_string(req, "name")};
    if (!normalize_currency(body_string(req, "currency"), n.currency)) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "currency", "currency must be 3 letters");
        return;
    }
    n.id = app_next_id(req->app);
    n.now = created_at_of(n.id);
    write_result w = commit_response(req, insert_account, &n);
    if (w != WRITE_OK && w != WRITE_FENCED) /* fenced: the answer is what the key holds */
        reply_error(req, ERR_INTERNAL, "the account could not be stored");
}

void accounts_get(request *req)
{
    uint64_t id;
    if (!path_id_or_reply(req, 0, "acct", &id))
        return;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    db_stmt *st =
        db_query(db, "SELECT " ACCOUNT_COLUMNS " FROM accounts WHERE id = $1 AND user_id = $2",
                 "ii", (int64_t)id, (int64_t)req->user.id);
    if (db_step(st) == DB_ROW) {
        if (!etag_not_modified_or_set(req, db_int(st, 4)))
            reply_json(req, 200, account_json(st));
    } else {
        reply_error(req, ERR_RESOURCE_MISSING, "no such account");
    }
    db_done(st);
}

static const list_query accounts_list_query = {
    .name = "accounts",
    .select = "SELECT " ACCOUNT_COLUMNS " FROM accounts",
    .parent_column = "user_id",
    .created_index = 5,
    .id_index = 0,
    .to_json = account_json,
};

void accounts_list(request *req)
{
    list_page(req, &accounts_list_query, req->user.id, NULL);
}

/* Does this account exist and belong to the caller? Fills currency when it does. */
db_status account_credit_at_commit(db_conn *db, uint64_t account, int64_t amount, int64_t at)
{
    store_add add = {.rank = ADD_RANK_ACCOUNT,
                     .sql = "UPDATE accounts SET balance = balance + $2, version = version + $3, "
                            "updated_at = $4 WHERE id = $1",
                     .count = 4,
                     .value = {(int64_t)account, amount, 1, at},
                     .kind = {ADD_KEY, ADD_SUM, ADD_SUM, ADD_MAX}};
    return store_add_at_commit(db, &add);
}

/* An account's owner and currency never change (no route updates either or deletes an
 * account), so what a lookup found holds for good, on every node: remembered here, it saves
 * each payment a read. Only finds are kept; a miss is asked again, as the account may be made
 * a moment later. */
#define ACCOUNT_FACT_SLOTS 4096 /* power of two; a newer account takes its slot's place */

typedef struct account_fact {
    uint64_t id, user;
    char currency[4];
} account_fact;

static account_fact account_facts[ACCOUNT_FACT_SLOTS];
static pthread_mutex_t account_facts_lock = PTHREAD_MUTEX_INITIALIZER;

static account_fact *fact_slot(uint64_t account)
{
    return &account_facts[(account * 0x9E3779B97F4A7C15ull >> 40) & (ACCOUNT_FACT_SLOTS - 1)];
}

bool account_owned(db_conn *db, uint64_t user, uint64_t account, char currency[4])
{
    account_fact known;
    pthread_mutex_lock(&account_facts_lock);
    known = *fact_slot(account);
    pthread_mutex_unlock(&account_facts_lock);
    if (account && known.id == account) {
        if (known.user != user)
            return false;
        if (currency)
            memcpy(currency, known.currency, 4);
        return true;
    }
    db_stmt *st = db_query(db, "SELECT currency FROM accounts WHERE id = $1 AND user_id = $2", "ii",
                           (int64_t)account, (int64_t)user);
    bool found = db_step(st) == DB_ROW;
    if (found) {
        account_fact fact = {.id = account, .user = user};
        snprintf(fact.currency, sizeof fact.currency, "%s", db_text(st, 0));
        if (currency)
            memcpy(currency, fact.currency, 4);
        pthread_mutex_lock(&account_facts_lock);
        *fact_slot(account) = fact;
        pthread_mutex_unlock(&account_facts_lock);
    }
    db_done(st);
    return found;
}

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

static void write_account_row(db_stmt *st, jsonw *w)
{
    jw_object_begin(w);
    jw_member_id(w, "id", "acct", (uint64_t)db_int(st, 0));
    jw_member_object(w, "account");
    jw_member_string(w, "currency", db_text(st, 1));
    jw_member_string(w, "name", db_text(st, 2));
    jw_member_int(w, "balance", db_int(st, 3));
    jw_member_int(w, "version", db_int(st, 4));
    jw_member_time(w, "created_at", db_int(st, 5));
    jw_object_end(w);
}

const resource account_resource = {
    .noun = "account",
    RESOURCE_TABLE("accounts", ACCOUNT_COLUMNS, "user_id"),
    .id_prefix = "acct",
    .path = "/v1/accounts/",
    .version_column = "version",
    .write_row = write_account_row,
};

/* POST /v1/accounts (§3) */
typedef struct account_input {
    char currency[4];
    const char *name;
} account_input;

static const field account_fields[] = {
    CURRENCY_FIELD(account_input, currency),
    {.name = "name", .kind = KIND_STRING, IN(account_input, name), .max = 100},
};
const schema accounts_create_body = SCHEMA(account_input, account_fields);

typedef struct new_account {
    request *req;
    const account_input *in;
    uint64_t id;
    int64_t now;
} new_account;

db_stmt *account_insert(db_conn *db, uint64_t id, uint64_t user, const char *currency,
                        const char *name, int64_t now)
{
    return db_query(db,
                    "INSERT INTO accounts (id, user_id, currency, name, balance, version, "
                    "created_at, updated_at) VALUES ($1, $2, $3, $4, 0, 1, $5, $5) "
                    "RETURNING " ACCOUNT_COLUMNS,
                    "iissi", (int64_t)id, (int64_t)user, currency, name, now);
}

static write_result insert_account(db_conn *db, void *arg)
{
    new_account *n = arg;
    request *req = n->req;
    db_status rc = resource_created(
        req, &account_resource,
        account_insert(db, n->id, req->user.id, n->in->currency, n->in->name, n->now), NULL);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    /* §15: the event commits with the account */
    return write_result_of_db(event_record_reply(db, req, "account.created", NULL));
}

step_result accounts_create(request *req, void *prepared)
{
    (void)prepared;
    new_account *n = arena_alloc(&req->arena, sizeof *n);
    *n = (new_account){.req = req, .in = req->input};
    if (!new_row_id_or_reply(req, &n->id, &n->now))
        return STEP_DONE;
    return resource_commit_then_answer(req, insert_account, n, "account", NULL);
}

void accounts_get(request *req)
{
    resource_get(req, &account_resource);
}

static const list_query accounts_list_query = {
    .name = "accounts",
    .of = &account_resource,
    .parent_column = "user_id",
};

void accounts_list(request *req)
{
    list_page(req, &accounts_list_query, req->user.id, NULL);
}

/* A credit of amount to an account, held to the batch's commit; its balance is value[1]. */
static store_add account_credit(uint64_t account, int64_t amount, int64_t at)
{
    return (store_add){.rank = ADD_RANK_ACCOUNT,
                       .sql = "UPDATE accounts SET balance = balance + $2, version = version + $3, "
                              "updated_at = $4 WHERE id = $1",
                       .count = 4,
                       .value = {(int64_t)account, amount, 1, at},
                       .kind = {ADD_KEY, ADD_SUM, ADD_SUM, ADD_MAX}};
}

db_status account_credit_at_commit(db_conn *db, uint64_t account, int64_t amount, int64_t at)
{
    store_add add = account_credit(account, amount, at);
    return store_add_at_commit(db, &add);
}

db_status account_credit_fits(db_conn *db, uint64_t account, int64_t amount, bool *fits)
{
    store_add add = account_credit(account, amount, 0);
    return sum_fits(db, &add, 1,
                    "SELECT CASE WHEN balance <= $1 THEN 1 ELSE 0 END FROM accounts WHERE id = $2",
                    fits);
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

/* Accounts (§3): create, get (with ETag), list. The balance is only ever moved by payments,
 * refunds and transfers, inside their own transactions. */
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
bool account_owned(db_conn *db, uint64_t user, uint64_t account, char currency[4])
{
    db_stmt *st = db_query(db, "SELECT currency FROM accounts WHERE id = $1 AND user_id = $2", "ii",
                           (int64_t)account, (int64_t)user);
    bool found = db_step(st) == DB_ROW;
    if (found && currency)
        snprintf(currency, 4, "%s", db_text(st, 0));
    db_done(st);
    return found;
}

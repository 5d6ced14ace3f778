#ifndef PAYD_API_RESOURCE_H
#define PAYD_API_RESOURCE_H
/* A resource descriptor: what every route of one kind of row shares, said once. Its table,
 * columns and owner make its GET by id; its writer is the one JSON shape of the row (the GET, the
 * lists, the 201 of its create, its events); its path and version column give the Location of a
 * 201 and the ETag (§9) of every answer that carries the row.
 *
 *   const resource order_resource = {.noun = "order", RESOURCE_TABLE("orders", ORDER_COLUMNS,
 *                                    "user_id"), .id_prefix = "ord", ...};
 *   void orders_get(request *req) { resource_get(req, &order_resource); }
 *
 * A create answers from its inserted row, read back in its own write job (`INSERT … RETURNING`
 * the resource's columns): the 201 is exactly what the GET that follows shows. */
#include <stdint.h>

#include "core/jsonw.h"
#include "request/request.h"
#include "request/step.h"
#include "store/db.h"
#include "store/store.h"

typedef struct resource {
    const char *noun;       /* "payment": a 404 says "no such payment" */
    const char *table;      /* "payments" */
    const char *columns;    /* what write_row reads, in its order; the id first */
    const char *owner;      /* "user_id": a caller sees only the rows it owns */
    const char *get_sql;    /* the GET by id, made of the three above (RESOURCE_TABLE) */
    const char *id_prefix;  /* "pay" */
    const char *path;       /* "/v1/payments/": a 201's Location is this and the row's key; NULL:
                             * the contract gives none */
    const char *key_column; /* the column Location names (a product: "sku"); NULL: the id */
    const char *version_column; /* the column served as the ETag ("version"); NULL: none */
    void (*write_row)(db_stmt *st, jsonw *w); /* the row st is on, as the contract shows it */
    /* the row holds stored JSON whose objects may not say their mode (an event's data): the
     * pipeline marks the answer on its way out (docs/modes.md) */
    bool unmarked_rows;
} resource;

/* A writer for an answer of r's rows: one whose objects say the request's mode, unless its
 * rows hold stored JSON (unmarked_rows). */
void resource_writer(request *req, const resource *r, jsonw *w);

/* The table, the columns and the owner, and the GET by id they make (compiled in, so the
 * statement cache keys on one text). */
#define RESOURCE_TABLE(table_, columns_, owner_)                                                   \
    .table = table_, .columns = columns_, .owner = owner_,                                         \
    .get_sql = "SELECT " columns_ " FROM " table_ " WHERE id = $1 AND " owner_ " = $2"

/* Where `column` sits among "a, b, c" or the columns of "SELECT a, b, c FROM …", as written
 * there (no column holds a comma inside parentheses); -1 when it is not there. Positions are
 * found by name, never kept by hand. */
int column_position(const char *columns, const char *column);

/* GET by the id in path parameter 0: the caller's row (resource_answer_get), else 404. */
void resource_get(request *req, const resource *r);
/* A GET's answer from a lookup (st: not yet stepped; finished here): 404 "no such <noun>" when
 * it found no row, else 200 with the row and its ETag, or 304 when If-None-Match names that. */
void resource_answer_get(request *req, const resource *r, db_stmt *st);
/* The row st is on as the answer, with its headers (resource_headers): 200 or 201. */
void resource_reply(request *req, const resource *r, db_stmt *st, int status);
/* A create's 201 from its `INSERT … RETURNING <columns>` (st: not yet stepped; finished here):
 * DB_DONE once answered, else the failure for the job to return. skipped: for an INSERT … ON
 * CONFLICT DO NOTHING, set when it returned no row (nothing answered); NULL: that is DB_ERROR. */
db_status resource_created(request *req, const resource *r, db_stmt *st, bool *skipped);
/* A secret only a create's answer shows (a new API key, a webhook endpoint's signing secret). */
typedef struct secret_member {
    const char *member; /* "secret" */
    const char *value;
    const char *rotate; /* how to get a new one, for the replay that no longer shows it */
} secret_member;
/* resource_created with the secret as one more member. The idempotency key keeps the answer
 * with the secret redacted (write_redacted_secret), so a replay shows that instead. */
db_status resource_created_with_secret(request *req, const resource *r, db_stmt *st,
                                       const secret_member *secret);
/* The same for a change that makes a new secret (a webhook endpoint's rotation), from its
 * `UPDATE … RETURNING <columns>` (st: not yet stepped; finished here): 200 with the row and the
 * secret, or 404 "no such <noun>" when it changed no row. DB_DONE once answered, else the
 * failure for the job to return. */
db_status resource_changed_with_secret(request *req, const resource *r, db_stmt *st,
                                       const secret_member *secret);
/* `"<member>": null, "redacted": {"member", "code": "secret_shown_once", "detail": rotate}` as
 * members of the object w is in: what a replay shows instead of a secret
 * (docs/idempotency.md, "Answers that show a secret"). */
void write_redacted_secret(jsonw *w, const char *member, const char *rotate);
/* The headers of an answer that carries a row: its ETag when r has a version, and on a 201 its
 * Location (r's path and key). The one place either is set. */
void resource_headers(request *req, const resource *r, int status, const char *key,
                      int64_t version);
/* The answer to a §9 write, from its row re-read after the conditional UPDATE in the same job
 * (st: not yet stepped; finished here): 404 when there is no row, 200 with the new ETag when the
 * UPDATE applied, else 412/409 version_conflict. Returns DB_BUSY when the row matches after all
 * (PostgreSQL: it changed between the two statements), so the job runs again; else DB_DONE. */
db_status resource_versioned_reply(request *req, const resource *r, db_stmt *st, bool applied,
                                   int64_t expected, bool from_if_match);

/* A per-user cap on what a create makes: count_sql counts what the user holds (one row, one
 * column; $1 is the user); past it the create answers `code` (409), naming `what` and `remedy`. */
typedef struct user_cap {
    const char *count_sql;
    payd_error code;
    const char *what;   /* "active API keys" */
    const char *remedy; /* "revoke one to make another" */
} user_cap;

/* In a create's write job, before its INSERT: when the user already holds `limit` of what c
 * counts, answers the 409 and sets *full (the job then returns DB_DONE, keeping nothing). On
 * PostgreSQL the user's row is locked first (FOR UPDATE), so two creates of one user count one
 * after the other, the second seeing the first's row; SQLite's one writer runs them one after the
 * other anyway. So two creates at limit - 1 never both pass. DB_DONE, or the failure for the job
 * to return. */
db_status user_cap_full_or_reply(db_conn *db, request *req, const user_cap *c, int64_t limit,
                                 bool *full);

/* A new row's Snowflake id and its created_at: the millisecond the id carries, so (created_at,
 * id), the order lists use, is the order ids were issued in. False, with 503
 * database_unavailable and Retry-After answered, while the node id's lease is lapsed: it never
 * waits for the renewal (it may run on the store's writer thread). */
bool new_row_id_or_reply(request *req, uint64_t *id, int64_t *created_at);

/* The answer to a create whose write job kept nothing (w: its result; WRITE_OK sets none, nor
 * does WRITE_FENCED: the answer is already what the key holds). retry_with names what a retry
 * repeats ("Idempotency-Key", "biz_seq"): 503 with Retry-After, as the same request runs once;
 * NULL: 500. */
void reply_not_stored(request *req, write_result w, const char *noun, const char *retry_with);

/* A create as a step (request/step.h): fn(ctx) in its write job with the key's answer, then the
 * answer above (reply_not_stored: noun, retry_with) when it kept nothing. No thread waits for
 * the commit. */
step_result resource_commit_then_answer(request *req, write_job_fn fn, void *ctx, const char *noun,
                                        const char *retry_with);
/* A change that takes no key (an update, a delete) as a step: fn(ctx) in its write job, which
 * sets the answer; when the job kept nothing, 500 with failed ("the order could not be
 * updated"). */
step_result resource_write_then_answer(request *req, write_job_fn fn, void *ctx,
                                       const char *failed);

#endif

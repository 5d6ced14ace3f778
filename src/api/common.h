#ifndef PAYD_API_COMMON_H
#define PAYD_API_COMMON_H
/* What every resource handler shares: body validation (unknown/missing/invalid parameters),
 * ids in paths, money and currency rules, ETags. */
#include <stdbool.h>
#include <stdint.h>

#include "core/ids.h"
#include "http/request.h"
#include "server/app.h"
#include "store/store.h"

#define MAX_AMOUNT 999999999999LL

typedef enum { FIELD_STRING, FIELD_INTEGER, FIELD_OBJECT } field_kind;

typedef struct body_field {
    const char *name;
    field_kind kind;
    bool required;
    int64_t min, max; /* string length, or integer value */
} body_field;

/* Checks the body against its fields: unknown → unknown_parameter, absent required →
 * missing_parameter, wrong kind or out of range → invalid_parameter, each with `param`.
 * A JSON null counts as absent. Replies and returns false at the first problem. */
bool check_body_or_reply(request *req, const body_field *fields, int count);
#define CHECK_BODY_OR_REPLY(req, fields)                                                           \
    check_body_or_reply(req, fields, (int)(sizeof fields / sizeof fields[0]))

/* Field accessors after check_body_or_reply: NULL / fallback when absent. */
const char *body_string(request *req, const char *name);
int64_t body_int(request *req, const char *name, int64_t fallback);
bool body_has(request *req, const char *name);

void reply_invalid_param(request *req, payd_error err, const char *param, const char *detail);

/* Parses a path id with its prefix; a malformed id is simply a missing resource. */
bool path_id_or_reply(request *req, int param, const char *prefix, uint64_t *out);

/* Upper-cases a 3-letter currency into out; false if it is not 3 letters. */
bool normalize_currency(const char *in, char out[4]);

/* A row's created_at is the millisecond its Snowflake id carries, so (created_at, id) order,
 * the order lists use, is the order ids were issued in and the order clients see. */
int64_t created_at_of(uint64_t id);

/* JSON helpers: ids and times as the contract writes them. */
json_t *json_id(const char *prefix, uint64_t id);
json_t *json_time(int64_t unix_us);
json_t *json_string_or_null(const char *s);

/* Does an If-None-Match / If-Match list name the strong tag etag (quoted)? weak_ok: weak
 * comparison, as If-None-Match uses. */
bool etag_list_matches(const char *list, const char *etag, bool weak_ok);
/* ETags (§9). etag_or_304 sets ETag and answers 304 when If-None-Match names it. */
bool etag_not_modified_or_set(request *req, int64_t version);
/* For writes: If-Match and a body "version". Returns true when the write may proceed;
 * *expected is the version the write must find (0 = any). Replies 412 itself only via
 * reply_version_conflict after the atomic update failed. */
bool if_match_version(request *req, int64_t *expected, bool *from_if_match);
void reply_version_conflict(request *req, bool from_if_match, int64_t current_version);

/* The optional body "version" of a §9 write, for a body_field table. */
#define VERSION_FIELD                                                                              \
    {                                                                                              \
        "version", FIELD_INTEGER, false, 1, INT64_MAX                                              \
    }
/* Sets the strong ETag "v<version>" on a write's answer. */
void reply_etag(request *req, int64_t version);
/* 201 with `Location: <collection>/<key>` (key: the new resource's id, or a sku); takes body. */
void reply_created(request *req, const char *collection, const char *key, json_t *body);
/* The answer to a §9 write, from its row re-read after the conditional UPDATE in the same job
 * (st: not yet stepped; finished here): 404 `missing` when there is no row, 200 with the new
 * ETag when the UPDATE applied, else 412/409 version_conflict. Returns DB_BUSY when the row
 * matches after all (PostgreSQL: it changed between the two statements), so the job runs
 * again; else 0. */
int reply_versioned_write(request *req, db_stmt *st, int version_col, bool applied,
                          int64_t expected, bool from_if_match, json_t *(*to_json)(db_stmt *),
                          const char *missing);
/* The account named by path parameter `param`, when it is the caller's; else 404. */
bool path_account_or_reply(request *req, int param, uint64_t *account);

/* The order in which jobs lock the rows many jobs change (store_add_at_commit): an account
 * before its volume buckets, as refunds and transfers lock them. */
enum { ADD_RANK_ACCOUNT = 1, ADD_RANK_VOLUME = 2 };

/* A user-owned row lookup through the thread's reader. */
db_conn *reader_or_reply(request *req);

#endif

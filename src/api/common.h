#ifndef PAYD_API_COMMON_H
#define PAYD_API_COMMON_H
/* What every resource handler shares: the body fields many routes declare (http/schema.h), ids
 * in paths, ETags. */
#include <stdbool.h>
#include <stdint.h>

#include "api/resource.h"
#include "core/ids.h"
#include "http/schema.h"
#include "node/app.h"
#include "processor/processor.h"
#include "request/request.h"
#include "request/step.h"
#include "store/store.h"

#define MAX_AMOUNT 999999999999LL

void reply_invalid_param(request *req, payd_error err, const char *param, const char *detail);

/* The processor of the request's mode (docs/modes.md): the builtin simulator for a test key,
 * --processor's for a live one. */
struct processor *request_processor(const request *req);
/* A live request may send a test token (processor_test_token) only to the builtin processor:
 * otherwise 400 invalid_parameter (param "source") and false (docs/api.md, "Test mode and live
 * mode"). */
bool source_of_mode_or_reply(request *req, const char *source);

/* The one adapter for "the processor answered: go on with the request". A step starts a call
 * with processor_*_start(..., processor_answered, processor_wait_for(req, &into, next, ctx))
 * and returns STEP_WAITING; the answer is stored in *into and next(req, ctx) runs as after a
 * write job (request_wake), on the thread that received it. */
typedef struct processor_wait processor_wait;
processor_wait *processor_wait_for(request *req, proc_result *into, request_step next, void *ctx);
void processor_answered(proc_result r, db_failure failure, void *arg);

/* Parses a path id with its prefix; a malformed id is simply a missing resource. */
bool path_id_or_reply(request *req, int param, const char *prefix, uint64_t *out);

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
/* The strong ETag of a version (§9): "v<version>", quoted. */
#define ETAG_STR_MAX 32
void etag_of(int64_t version, char out[ETAG_STR_MAX]);
/* Does the request's If-None-Match name this version's ETag (a GET answers 304)? */
bool etag_not_modified(request *req, int64_t version);
/* For writes: If-Match, else the body's "version" (0: none). *expected is the version the write
 * must find (0 = any; -1 = none can match, for an If-Match that names no version of ours). The
 * write answers 412/409 via reply_version_conflict after the atomic update failed. */
void if_match_version(request *req, int64_t body_version, int64_t *expected, bool *from_if_match);
void reply_version_conflict(request *req, bool from_if_match, int64_t current_version);

/* Body fields many routes share (http/schema.h), each rule said once. */
#define AMOUNT_FIELD(type, member, required_)                                                      \
    {                                                                                              \
        .name = "amount", .kind = KIND_INTEGER, .required = required_, IN(type, member), .min = 1, \
        .max = MAX_AMOUNT                                                                          \
    }
/* An active ISO 4217 code in any case (core/currency.h), decoded upper case into a char[4]. For
 * const field tables only: the check is data passed down with each decode, as webhooks.c's
 * field checks are (docs/architecture.md, "Callbacks"). */
#define CURRENCY_FIELD(input_type, member)                                                         \
    {                                                                                              \
        .name = "currency", .kind = KIND_CUSTOM, .required = true, IN(input_type, member),         \
        .type = "string", .min = 3, .max = 3, .pattern = "^[A-Za-z]{3}$",                          \
        .detail = "'currency' must be an active ISO 4217 currency code, such as USD",              \
        .check = currency_check                                                                    \
    }
bool currency_check(const field *f, json_t *value, void *out, arena *a, const char **detail);
#define DESCRIPTION_FIELD(type, member, max_)                                                      \
    {                                                                                              \
        .name = "description", .kind = KIND_STRING, IN(type, member), .max = max_                  \
    }
/* The optional body "version" of a §9 write (0 when not given). */
#define VERSION_FIELD(type, member)                                                                \
    {                                                                                              \
        .name = "version", .kind = KIND_INTEGER, IN(type, member), .min = 1, .max = INT64_MAX      \
    }
/* The account named by path parameter `param`, when it is the caller's; else 404. */
bool path_account_or_reply(request *req, int param, uint64_t *account);

/* The order in which jobs lock the rows many jobs change (store_add_at_commit): an account
 * before its volume buckets, as refunds and transfers lock them. */
enum { ADD_RANK_ACCOUNT = 1, ADD_RANK_VOLUME = 2 };

/* Checked arithmetic on money (docs/concurrency.md, "Balances and sums"): in a write job, whether
 * the row add names, plus what this batch holds for it already, plus add's value[value] stays
 * within a 64-bit integer. check_sql selects 1 when the row's column is at most $1, the most it
 * may hold before the addition; its $2... are add's ADD_KEY values, in order. A row it finds
 * none of counts as not fitting. */
db_status sum_fits(db_conn *db, const store_add *add, int value, const char *check_sql, bool *fits);

/* A user-owned row lookup through the thread's reader. */
db_conn *reader_or_reply(request *req);

#endif

/* Payment volume statistics (§16) and the rollup they read; see stats.h for what a bucket
 * counts. The rollup keeps one row per account and UTC hour; a day is the sum of its 24 hours,
 * so a query costs the number of hours in its range that saw payments, never the number of
 * payments. On PostgreSQL the rollup row is written after the account row in every job that
 * touches both, the order the balance update already imposes, so it adds no new lock order. */
#include "api/stats.h"

#include <stdio.h>
#include <string.h>

#include "api/common.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "core/timefmt.h"

#define HOUR_US (3600LL * 1000000)
#define DAY_US  (24 * HOUR_US)

/* A payment's addition to its account's hour, held to the batch's commit (value[3]: amount). */
static store_add volume_add(uint64_t account_id, int64_t created_at, int64_t amount)
{
    return (store_add){
        .rank = ADD_RANK_VOLUME,
        .sql = "INSERT INTO payment_volume (account_id, bucket_start, succeeded_count, "
               "succeeded_amount, refunded_amount) VALUES ($1, $2, $3, $4, 0) "
               "ON CONFLICT (account_id, bucket_start) DO UPDATE SET "
               "succeeded_count = payment_volume.succeeded_count + excluded.succeeded_count, "
               "succeeded_amount = payment_volume.succeeded_amount + excluded.succeeded_amount",
        .count = 4,
        .value = {(int64_t)account_id, created_at - created_at % HOUR_US, 1, amount},
        .kind = {ADD_KEY, ADD_KEY, ADD_SUM, ADD_SUM}};
}

db_status stats_record_payment(db_conn *db, uint64_t account_id, int64_t created_at, int64_t amount)
{
    store_add add = volume_add(account_id, created_at, amount);
    return store_add_at_commit(db, &add);
}

db_status stats_record_capture(db_conn *db, uint64_t account_id, int64_t created_at, int64_t amount,
                               bool first)
{
    store_add add = volume_add(account_id, created_at, amount);
    add.value[2] = first ? 1 : 0; /* the payment counts once, at its first capture */
    return store_add_at_commit(db, &add);
}

db_status stats_payment_fits(db_conn *db, uint64_t account_id, int64_t created_at, int64_t amount,
                             bool *fits)
{
    store_add add = volume_add(account_id, created_at, amount);
    return sum_fits(db, &add, 3,
                    "SELECT CASE WHEN COALESCE((SELECT succeeded_amount FROM payment_volume "
                    "WHERE account_id = $2 AND bucket_start = $3), 0) <= $1 THEN 1 ELSE 0 END",
                    fits);
}

db_status stats_record_refund(db_conn *db, uint64_t payment_id, int64_t amount)
{
    db_status rc = db_exec(db,
                           "UPDATE payment_volume SET refunded_amount = refunded_amount + $2 "
                           "WHERE (account_id, bucket_start) = (SELECT account_id, "
                           "created_at / 3600000000 * 3600000000 FROM payments WHERE id = $1)",
                           "ii", (int64_t)payment_id, amount);
    /* every charged payment made its bucket: a missing one means the rollup lost a payment,
     * and a refund must not widen the gap silently */
    return rc == DB_DONE && db_changes(db) != 1 ? DB_ERROR : rc;
}

db_status stats_add_payments(db_conn *db, uint64_t account_id, int64_t gte, int64_t lt)
{
    return db_exec(
        db,
        "INSERT INTO payment_volume (account_id, bucket_start, succeeded_count, "
        "succeeded_amount, refunded_amount) "
        "SELECT account_id, created_at / 3600000000 * 3600000000, COUNT(*), "
        "SUM(amount), SUM(refunded_amount) FROM payments "
        "WHERE account_id = $1 AND created_at >= $2 AND created_at < $3 "
        "AND status <> 'failed' GROUP BY 1, 2 "
        "ON CONFLICT (account_id, bucket_start) DO UPDATE SET "
        "succeeded_count = payment_volume.succeeded_count + excluded.succeeded_count, "
        "succeeded_amount = payment_volume.succeeded_amount + excluded.succeeded_amount, "
        "refunded_amount = payment_volume.refunded_amount + excluded.refunded_amount",
        "iii", (int64_t)account_id, gte, lt);
}

/* ---- GET /v1/accounts/{id}/payments/stats ---- */

/* A bound is optional; when given it must fall on a bucket boundary (a UTC hour, or a UTC
 * midnight for days), since the rollup cannot split a bucket. */
static bool bound_or_reply(request *req, const char *name, const input_time *bound, int64_t width,
                           const char *unit)
{
    if (bound->text && bound->us % width != 0) {
        char detail[160];
        snprintf(detail, sizeof detail, "%s must fall on the start of a UTC %s, such as %s", name,
                 unit, width == HOUR_US ? "2026-11-30T08:00:00Z" : "2026-11-30T00:00:00Z");
        reply_invalid_param(req, ERR_INVALID_PARAMETER, name, detail);
        return false;
    }
    return true;
}

/* One bucket, or the total when start is negative. */
static json_t *bucket_json(int64_t start, int64_t count, int64_t amount, int64_t refunded)
{
    json_t *o = json_object();
    if (start >= 0)
        json_object_set_new(o, "bucket_start", json_time(start));
    json_object_set_new(o, "count", json_integer(count));
    json_object_set_new(o, "amount", json_integer(amount));
    json_object_set_new(o, "refunded_amount", json_integer(refunded));
    json_object_set_new(o, "net_amount", json_integer(amount - refunded));
    return o;
}

typedef struct volume {
    int64_t count, amount, refunded;
} volume;

/* Adds an hour's row (columns 1-3 of st) to v; false when a sum would pass INT64_MAX. */
static bool volume_add_row(volume *v, db_stmt *st)
{
    return !__builtin_add_overflow(v->count, db_int(st, 1), &v->count) &&
           !__builtin_add_overflow(v->amount, db_int(st, 2), &v->amount) &&
           !__builtin_add_overflow(v->refunded, db_int(st, 3), &v->refunded);
}

typedef enum { BUCKETS_READ, BUCKETS_OVERFLOW, BUCKETS_FAILED } buckets_end;

/* The hours of [gte, lt) that saw payments, summed into buckets of width µs (appended to data)
 * and into total. Summed here, with checked arithmetic, rather than by SQL's SUM: a day of hours
 * near the limit would overflow it (docs/concurrency.md, "Balances and sums"). */
static buckets_end read_buckets(db_conn *db, uint64_t account, int64_t width, int64_t gte,
                                int64_t lt, json_t *data, volume *total)
{
    db_stmt *st = db_query(db,
                           "SELECT bucket_start, succeeded_count, succeeded_amount, "
                           "refunded_amount FROM payment_volume WHERE account_id = $1 "
                           "AND bucket_start >= $2 AND bucket_start < $3 ORDER BY bucket_start",
                           "iii", (int64_t)account, gte, lt);
    volume bucket = {0};
    int64_t start = -1;
    bool fits = true;
    db_status rc = DB_DONE;
    while (fits && (rc = db_step(st)) == DB_ROW) {
        int64_t at = db_int(st, 0) / width * width;
        if (start >= 0 && at != start) {
            json_array_append_new(data,
                                  bucket_json(start, bucket.count, bucket.amount, bucket.refunded));
            bucket = (volume){0};
        }
        start = at;
        fits = volume_add_row(&bucket, st) && volume_add_row(total, st);
    }
    db_done(st);
    if (!fits)
        return BUCKETS_OVERFLOW;
    if (rc != DB_DONE)
        return BUCKETS_FAILED;
    if (start >= 0)
        json_array_append_new(data,
                              bucket_json(start, bucket.count, bucket.amount, bucket.refunded));
    return BUCKETS_READ;
}

void payments_stats(request *req)
{
    uint64_t account;
    if (!path_id_or_reply(req, 0, "acct", &account))
        return;
    db_conn *db = reader_or_reply(req);
    if (!db)
        return;
    char currency[4];
    if (!account_owned(db, req->user.id, account, currency)) {
        reply_error(req, ERR_RESOURCE_MISSING, "no such account");
        return;
    }
    const list_params *in = req->input;
    const char *interval = in->interval; /* hour or day, day by default */
    int64_t width = !strcmp(interval, "hour") ? HOUR_US : DAY_US;
    const char *unit = width == HOUR_US ? "hour" : "day";
    if (!bound_or_reply(req, "created_gte", &in->created_gte, width, unit) ||
        !bound_or_reply(req, "created_lt", &in->created_lt, width, unit))
        return;
    int64_t gte = in->created_gte.us, lt = in->created_lt.us;
    bool has_gte = in->created_gte.text != NULL, has_lt = in->created_lt.text != NULL;
    if (has_gte && has_lt && gte >= lt) {
        reply_invalid_param(req, ERR_INVALID_PARAMETER, "created_lt",
                            "created_lt must be later than created_gte");
        return;
    }
    json_t *data = json_array();
    volume total = {0};
    buckets_end end = read_buckets(db, account, width, has_gte ? gte : INT64_MIN,
                                   has_lt ? lt : INT64_MAX, data, &total);
    if (end != BUCKETS_READ) {
        json_decref(data);
        if (end == BUCKETS_OVERFLOW)
            reply_error(req, ERR_BALANCE_LIMIT_EXCEEDED,
                        "the volume of this range passes the largest 64-bit integer; ask for a "
                        "shorter range");
        else
            reply_error(req, ERR_INTERNAL, "the statistics could not be read");
        return;
    }
    json_t *body = json_pack(
        "{s:s, s:o, s:s, s:s, s:o, s:o, s:o, s:o}", "object", "payment_stats", "account_id",
        json_id("acct", account), "currency", currency, "interval", interval, "created_gte",
        has_gte ? json_time(gte) : json_null(), "created_lt", has_lt ? json_time(lt) : json_null(),
        "data", data, "total", bucket_json(-1, total.count, total.amount, total.refunded));
    reply_json(req, 200, body);
}

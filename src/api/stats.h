#ifndef PAYD_API_STATS_H
#define PAYD_API_STATS_H
/* Payment volume statistics (§16): a rollup of charged payments per account and UTC hour,
 * kept in the write transaction of the change it counts, so a query reads a few buckets
 * instead of every payment. A bucket counts the payments created in its hour whose charge
 * succeeded (status succeeded, partially_refunded or refunded), their amount, and the amount
 * refunded from them so far; a refund counts in its payment's bucket, whenever it happens, so
 * the rollup always equals a sum over the payments table. */
#include "request/request.h"
#include "store/db.h"

/* GET /v1/accounts/{id}/payments/stats?interval=hour|day&created_gte=&created_lt= */
/* payments_stats (the route handler) is declared with the others in api/handlers.h */

/* In the payment's own write job, for a payment whose charge succeeded; applied when the
 * batch commits (store_add_at_commit). */
db_status stats_record_payment(db_conn *db, uint64_t account_id, int64_t created_at,
                               int64_t amount);
/* §17: a capture of a manual payment (created_at: the payment's) adds its amount to the
 * payment's hour; the payment itself is counted at its first capture only. */
db_status stats_record_capture(db_conn *db, uint64_t account_id, int64_t created_at, int64_t amount,
                               bool first);
/* Before it: whether the hour's volume can take amount more (sum_fits, api/common.h). */
db_status stats_payment_fits(db_conn *db, uint64_t account_id, int64_t created_at, int64_t amount,
                             bool *fits);
/* In the refund's own write job, once the payment's refunded_amount has grown by amount. */
db_status stats_record_refund(db_conn *db, uint64_t payment_id, int64_t amount);
/* Adds an account's charged payments created in [gte, lt) µs to the rollup in one statement,
 * for rows written in bulk (payd dev seed) rather than through the API. */
db_status stats_add_payments(db_conn *db, uint64_t account_id, int64_t gte, int64_t lt);

#endif

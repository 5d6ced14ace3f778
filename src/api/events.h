#ifndef PAYD_API_EVENTS_H
#define PAYD_API_EVENTS_H
/* Events (§15): a transactional outbox. A handler's write job records the event of its change
 * with one call, on the job's own connection, so the event commits with the change or not at
 * all; the same call queues one delivery per matching, enabled webhook endpoint of the user.
 *
 *   rc = event_record_reply(db, req, "payment.succeeded", NULL);   // the answer is the object
 *
 * Every function returns DB_DONE (0) or the failing db_status, for the job to return. */
#include <stdbool.h>
#include <stdint.h>

#include "http/schema.h"
#include "request/request.h"
#include "store/db.h"

/* Records `type` with object_json (the resource right after the change) for the request's user. */
db_status event_record(db_conn *db, request *req, const char *type, const char *object_json);
/* The same with the handler's answer as the object: its body, or the body's `member` (a decline's
 * problem carries its payment). Call it after the job set its answer. */
db_status event_record_reply(db_conn *db, request *req, const char *type, const char *member);
/* payment.succeeded or payment.failed from the payment job's answer, and order.status_changed
 * when the payment paid an order. */
db_status event_record_payment(db_conn *db, request *req, bool succeeded, uint64_t order_id);
/* order.status_changed when the statement just run (a full refund) moved the payment's order. */
db_status event_record_refunded_order(db_conn *db, request *req, uint64_t payment_id);
/* order.status_changed for an order another resource's job moved (a payment, a refund): the
 * order row as this transaction sees it. */
db_status event_record_order(db_conn *db, request *req, uint64_t order_id);

#endif

#ifndef PAYD_WEBHOOK_OUTBOX_H
#define PAYD_WEBHOOK_OUTBOX_H
/* The outbox (docs/webhooks.md): an event row and, in the same transaction, one pending
 * delivery per enabled endpoint of its user that wants its type. Written by the handlers'
 * write jobs (api/events.c) and by the delivery side itself (an endpoint disabled after days of
 * failures, webhook/recovery.h); the endpoint document both show lives here too. */
#include <stdint.h>

#include "core/jsonw.h"
#include "store/db.h"

/* An endpoint wants an event type when its list (",a,b,") is ",*," or holds ",type,". Written
 * in SQL both databases speak: replace() finds the type without LIKE's wildcards. */
#define WEBHOOK_ENDPOINT_WANTS(type_param)                                                         \
    "(events = ',*,' OR length(replace(events, ',' || " type_param " || ',', '')) < "              \
    "length(events))"

/* The enabled endpoints of `user` that want `type`, at most `limit`, the oldest first: their
 * ids (malloc'd, *count of them, NULL when none). DB_DONE, or the read's failure. */
db_status webhook_subscribers(db_conn *db, uint64_t user, const char *type, int64_t limit,
                              uint64_t **ids, int *count);

/* Inserts event `id` of `user` (data: its object as JSON text) and queues its deliveries, to at
 * most `fanout` endpoints (--max-webhook-fanout), the oldest first. Wakes the worker when that
 * queued any. DB_DONE, or the failure for the job to return. */
db_status webhook_event_insert(db_conn *db, uint64_t id, uint64_t user, const char *type,
                               const char *data, int64_t created, int64_t fanout);

/* The columns webhook_endpoint_write reads, in its order. */
#define WEBHOOK_ENDPOINT_COLUMNS                                                                   \
    "id, url, events, description, disabled, created_at, updated_at, previous_secret_expires_at"
#define WEBHOOK_ENDPOINT_COLUMN_COUNT 8 /* a column RETURNING adds after them is at this index */
/* The endpoint as the API shows it (never its secret), from a row of those columns. */
void webhook_endpoint_write(db_stmt *st, jsonw *w);

#endif

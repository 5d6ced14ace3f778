#ifndef PAYD_WEBHOOK_DELIVERY_H
#define PAYD_WEBHOOK_DELIVERY_H
/* Webhook delivery (§15): a worker thread on every node claims due deliveries from the outbox
 * with a lease, POSTs them signed through one libcurl multi handle (many in flight, a cap per
 * endpoint, so a slow or dead endpoint cannot hold up the others), records every attempt and
 * schedules the next one. Exactly one node works on an attempt at a time: the claim takes rows
 * whose lease has run out (PostgreSQL: FOR UPDATE SKIP LOCKED; SQLite: the single writer), and
 * every later write names the claim's lease_id, so a worker that lost its lease changes
 * nothing. A crash leaves leases that simply run out, and the attempt is made again. */
#include <stdbool.h>
#include <stdint.h>

#include "core/jsonw.h"
#include "webhook/event_document.h" /* event_document_write: the body of every delivery */

struct app;

int webhook_worker_start(struct app *a);
void webhook_worker_stop(void);

/* Counts events written by a job and, when it queued deliveries, wakes the worker: on SQLite
 * its claim queues behind the commit that holds them, so the first attempt leaves right after
 * that commit. */
void webhook_events_recorded(int events, int64_t deliveries);

/* The delay before retry `attempt` (1 = after the first failure), nominal, before jitter. */
int64_t webhook_retry_delay_ms(int attempt);

/* Prometheus text for the webhook metrics (malloc'd). */
char *webhook_metrics_render(struct app *a);

#endif

#ifndef PAYD_NODE_METRICS_H
#define PAYD_NODE_METRICS_H
/* Prometheus counters and histograms, rendered by GET /metrics. Lock-free on the hot path:
 * every counter is an atomic in a fixed table. */
#include <stdint.h>

typedef struct metrics metrics;
struct app;

metrics *metrics_create(void);
void metrics_free(metrics *m);
void metrics_observe_request(metrics *m, const char *route, const char *method, int status,
                             double duration_ms);
void metrics_count_replay(metrics *m);
void metrics_count_idem_conflict(metrics *m, const char *code);
void metrics_count_rate_limited(metrics *m);
void metrics_count_processor(metrics *m, const char *operation, const char *outcome);
/* The Prometheus text exposition of this node's counters; malloc'd. GET /metrics (api/ops.c)
 * follows it with the webhook worker's own (webhook_metrics_render, webhook/delivery.h). */
char *metrics_render(metrics *m, struct app *a);

#endif

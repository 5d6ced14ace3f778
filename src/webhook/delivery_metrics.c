/* The webhook metrics: counters and histograms the worker and the recorder feed, and their
 * Prometheus text. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timefmt.h"
#include "node/app.h"
#include "store/store.h"
#include "webhook/delivery.h"
#include "webhook/delivery_internal.h"

#define MAX_BUCKETS 16

typedef struct histogram {
    const char *name, *help;
    const double *bounds; /* seconds, ascending, ending with 0 */
    atomic_llong buckets[MAX_BUCKETS + 1];
    atomic_llong sum_us, count;
} histogram;

static const double attempt_bounds_s[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                          0.5,   1,    2.5,   5,    10,  0};
static const double lag_bounds_s[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60, 600, 3600, 86400, 0};

static struct {
    atomic_llong events_written;
    atomic_llong delivered, retried, failed; /* attempts by outcome */
    histogram attempt, lag;
} stats = {
    .attempt = {.name = "payd_webhook_attempt_duration_seconds",
                .help = "Webhook request latency, per attempt.",
                .bounds = attempt_bounds_s},
    .lag = {.name = "payd_webhook_delivery_lag_seconds",
            .help = "From an event's commit to its delivery (2xx), retries included.",
            .bounds = lag_bounds_s},
};

static void observe(histogram *h, int64_t us)
{
    size_t b = 0;
    while (h->bounds[b] > 0 && (double)us / 1e6 > h->bounds[b])
        b++;
    atomic_fetch_add(&h->buckets[b], 1);
    atomic_fetch_add(&h->sum_us, us);
    atomic_fetch_add(&h->count, 1);
}

void delivery_count_events(int events)
{
    atomic_fetch_add(&stats.events_written, events);
}

void delivery_observe_attempt(int64_t us)
{
    observe(&stats.attempt, us);
}

void delivery_observe_lag(int64_t us)
{
    observe(&stats.lag, us);
}

void delivery_count_outcome(const char *outcome)
{
    atomic_fetch_add(!strcmp(outcome, "delivered")  ? &stats.delivered
                     : !strcmp(outcome, "retrying") ? &stats.retried
                                                    : &stats.failed,
                     1);
}

char *webhook_metrics_render(app *a)
{
    size_t cap = 16384, len = 0; /* the whole text is about 4 KiB */
    char *out = malloc(cap);
#define PUT(...) len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, __VA_ARGS__)
    PUT("# HELP payd_events_written_total Events recorded with their change.\n"
        "# TYPE payd_events_written_total counter\npayd_events_written_total %lld\n",
        (long long)atomic_load(&stats.events_written));
    PUT("# HELP payd_webhook_attempts_total Webhook delivery attempts by outcome.\n"
        "# TYPE payd_webhook_attempts_total counter\n"
        "payd_webhook_attempts_total{outcome=\"delivered\"} %lld\n"
        "payd_webhook_attempts_total{outcome=\"retrying\"} %lld\n"
        "payd_webhook_attempts_total{outcome=\"failed\"} %lld\n",
        (long long)atomic_load(&stats.delivered), (long long)atomic_load(&stats.retried),
        (long long)atomic_load(&stats.failed));
    for (histogram *h = &stats.attempt; h <= &stats.lag; h++) {
        PUT("# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
        long long cumulative = 0;
        size_t b = 0;
        for (; h->bounds[b] > 0; b++) {
            cumulative += atomic_load(&h->buckets[b]);
            PUT("%s_bucket{le=\"%g\"} %lld\n", h->name, h->bounds[b], cumulative);
        }
        cumulative += atomic_load(&h->buckets[b]);
        PUT("%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n", h->name, cumulative,
            h->name, (double)atomic_load(&h->sum_us) / 1e6, h->name,
            (long long)atomic_load(&h->count));
    }
    double oldest = 0;
    db_conn *db = store_reader(a->store);
    db_stmt *st = db ? db_query(db,
                                "SELECT MIN(created_at) FROM webhook_deliveries "
                                "WHERE status = 'pending'",
                                "")
                     : NULL;
    if (st && db_step(st) == DB_ROW && !db_is_null(st, 0))
        oldest = (double)(now_us() - db_int(st, 0)) / 1e6;
    if (st)
        db_done(st);
    PUT("# HELP payd_webhook_oldest_undelivered_seconds Age of the oldest event not yet "
        "delivered to an endpoint.\n"
        "# TYPE payd_webhook_oldest_undelivered_seconds gauge\n"
        "payd_webhook_oldest_undelivered_seconds %.3f\n",
        oldest);
#undef PUT
    return out;
}

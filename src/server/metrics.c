#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/app.h"
#include "store/store.h"
#include "webhook/delivery.h"

#define MAX_SERIES 512

typedef struct request_series {
    const char *route; /* a route pattern: static, so compared by address first */
    char method[8];
    int status;
    atomic_llong count;
} request_series;

static const double latency_bounds_ms[] = {0.25, 0.5, 1,   2.5,  5,    10,   25,   50,
                                           100,  250, 500, 1000, 2500, 5000, 10000};
#define LATENCY_BUCKETS (sizeof latency_bounds_ms / sizeof latency_bounds_ms[0])

typedef struct named_counter {
    const char *a, *b;
    atomic_llong count;
} named_counter;

struct metrics {
    pthread_mutex_t grow; /* taken only to add a new series */
    request_series series[MAX_SERIES];
    atomic_int series_count;
    atomic_llong latency_buckets[LATENCY_BUCKETS + 1];
    atomic_llong latency_sum_us, latency_count;
    atomic_llong replays, rate_limited;
    named_counter idem_conflicts[4];
    named_counter processor_calls[16];
};

metrics *metrics_create(void)
{
    metrics *m = calloc(1, sizeof *m);
    pthread_mutex_init(&m->grow, NULL);
    return m;
}

void metrics_free(metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->grow);
    free(m);
}

static request_series *find_series(metrics *m, const char *route, const char *method, int status)
{
    int n = atomic_load(&m->series_count);
    for (int i = 0; i < n; i++) {
        request_series *s = &m->series[i];
        if (s->status == status && (s->route == route || !strcmp(s->route, route)) &&
            !strcmp(s->method, method))
            return s;
    }
    return NULL;
}

void metrics_observe_request(metrics *m, const char *route, const char *method, int status,
                             double duration_ms)
{
    request_series *s = find_series(m, route, method, status);
    if (!s) {
        pthread_mutex_lock(&m->grow);
        s = find_series(m, route, method, status);
        int n = atomic_load(&m->series_count);
        if (!s && n < MAX_SERIES) {
            s = &m->series[n];
            s->route = route;
            snprintf(s->method, sizeof s->method, "%s", method);
            s->status = status;
            atomic_store(&m->series_count, n + 1);
        }
        pthread_mutex_unlock(&m->grow);
    }
    if (s)
        atomic_fetch_add(&s->count, 1);
    size_t b = 0;
    while (b < LATENCY_BUCKETS && duration_ms > latency_bounds_ms[b])
        b++;
    atomic_fetch_add(&m->latency_buckets[b], 1);
    atomic_fetch_add(&m->latency_sum_us, (long long)(duration_ms * 1000));
    atomic_fetch_add(&m->latency_count, 1);
}

static void count_named(metrics *m, named_counter *table, size_t size, const char *a, const char *b)
{
    for (size_t i = 0; i < size; i++) {
        named_counter *c = &table[i];
        if (!c->a) {
            pthread_mutex_lock(&m->grow);
            if (!c->a) {
                c->b = b;
                c->a = a;
            }
            pthread_mutex_unlock(&m->grow);
        }
        if (!strcmp(c->a, a) && (!b || !strcmp(c->b, b))) {
            atomic_fetch_add(&c->count, 1);
            return;
        }
    }
}

void metrics_count_replay(metrics *m)
{
    atomic_fetch_add(&m->replays, 1);
}

void metrics_count_idem_conflict(metrics *m, const char *code)
{
    count_named(m, m->idem_conflicts, 4, code, NULL);
}

void metrics_count_rate_limited(metrics *m)
{
    atomic_fetch_add(&m->rate_limited, 1);
}

void metrics_count_processor(metrics *m, const char *operation, const char *outcome)
{
    count_named(m, m->processor_calls, 16, operation, outcome);
}

typedef struct text {
    char *buf;
    size_t len, cap;
} text;

__attribute__((format(printf, 2, 3))) static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        if ((size_t)n < t->cap - t->len) {
            t->len += (size_t)n;
            return;
        }
        t->cap = t->cap * 2 + (size_t)n;
        t->buf = realloc(t->buf, t->cap);
    }
}

char *metrics_render(metrics *m, app *a)
{
    text t = {.buf = malloc(8192), .cap = 8192};
    put(&t, "# HELP payd_http_requests_total HTTP requests by route pattern, method and status.\n"
            "# TYPE payd_http_requests_total counter\n");
    int n = atomic_load(&m->series_count);
    for (int i = 0; i < n; i++)
        put(&t, "payd_http_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} %lld\n",
            m->series[i].route, m->series[i].method, m->series[i].status,
            atomic_load(&m->series[i].count));

    put(&t, "# HELP payd_http_request_duration_seconds Request latency.\n"
            "# TYPE payd_http_request_duration_seconds histogram\n");
    long long cumulative = 0;
    for (size_t b = 0; b < LATENCY_BUCKETS; b++) {
        cumulative += atomic_load(&m->latency_buckets[b]);
        put(&t, "payd_http_request_duration_seconds_bucket{le=\"%g\"} %lld\n",
            latency_bounds_ms[b] / 1000, cumulative);
    }
    cumulative += atomic_load(&m->latency_buckets[LATENCY_BUCKETS]);
    put(&t, "payd_http_request_duration_seconds_bucket{le=\"+Inf\"} %lld\n", cumulative);
    put(&t, "payd_http_request_duration_seconds_sum %.6f\n",
        (double)atomic_load(&m->latency_sum_us) / 1e6);
    put(&t, "payd_http_request_duration_seconds_count %lld\n", atomic_load(&m->latency_count));

    put(&t,
        "# HELP payd_idempotent_replays_total Stored responses replayed for a repeated key.\n"
        "# TYPE payd_idempotent_replays_total counter\npayd_idempotent_replays_total %lld\n",
        atomic_load(&m->replays));
    put(&t, "# HELP payd_idempotency_conflicts_total Keys refused, by problem code.\n"
            "# TYPE payd_idempotency_conflicts_total counter\n");
    for (int i = 0; i < 4 && m->idem_conflicts[i].a; i++)
        put(&t, "payd_idempotency_conflicts_total{code=\"%s\"} %lld\n", m->idem_conflicts[i].a,
            atomic_load(&m->idem_conflicts[i].count));
    put(&t,
        "# HELP payd_rate_limited_total Requests refused with 429.\n"
        "# TYPE payd_rate_limited_total counter\npayd_rate_limited_total %lld\n",
        atomic_load(&m->rate_limited));
    put(&t, "# HELP payd_processor_calls_total Processor calls by operation and outcome.\n"
            "# TYPE payd_processor_calls_total counter\n");
    for (int i = 0; i < 16 && m->processor_calls[i].a; i++)
        put(&t, "payd_processor_calls_total{operation=\"%s\",outcome=\"%s\"} %lld\n",
            m->processor_calls[i].a, m->processor_calls[i].b,
            atomic_load(&m->processor_calls[i].count));

    store_stats st;
    store_get_stats(a->store, &st);
    put(&t, "# HELP payd_store_commit_batch_size Write jobs per committed transaction.\n"
            "# TYPE payd_store_commit_batch_size histogram\n");
    long long jobs_cumulative = 0;
    for (int b = 0; b < 8; b++) {
        jobs_cumulative += st.batch_size_buckets[b];
        if (b < 7)
            put(&t, "payd_store_commit_batch_size_bucket{le=\"%d\"} %lld\n", (2 << b) - 1,
                jobs_cumulative);
    }
    put(&t, "payd_store_commit_batch_size_bucket{le=\"+Inf\"} %lld\n", jobs_cumulative);
    put(&t, "payd_store_commit_batch_size_sum %lld\npayd_store_commit_batch_size_count %lld\n",
        (long long)st.jobs, (long long)st.batches);
    put(&t,
        "# HELP payd_store_failed_commits_total Transactions that failed to commit.\n"
        "# TYPE payd_store_failed_commits_total counter\npayd_store_failed_commits_total %lld\n",
        (long long)st.failed_commits);
    put(&t,
        "# HELP payd_store_queue_depth Write jobs waiting for the writer.\n"
        "# TYPE payd_store_queue_depth gauge\npayd_store_queue_depth %lld\n",
        (long long)st.queue_depth);
    put(&t,
        "# HELP payd_requests_in_flight Requests waiting on a worker.\n"
        "# TYPE payd_requests_in_flight gauge\npayd_requests_in_flight %d\n",
        atomic_load(&a->in_flight));

    /* ---- events and webhooks (§15): their own counters, in src/webhook/delivery.c ---- */
    char *webhooks = webhook_metrics_render(a);
    put(&t, "%s", webhooks);
    free(webhooks);
    return t.buf;
}

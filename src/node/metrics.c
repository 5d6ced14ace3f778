#include "node/metrics.h"

#include <dirent.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/version.h"
#include "node/app.h"
#include "node/limits_redis.h"
#include "store/store.h"

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

/* One latency histogram per route pattern (or "unmatched"): the route table is fixed, so the
 * set of histograms is too. */
#define MAX_ROUTE_HISTOGRAMS 128
typedef struct route_latency {
    const char *route;
    atomic_llong buckets[LATENCY_BUCKETS + 1];
    atomic_llong sum_us, count;
} route_latency;

typedef struct named_counter {
    const char *a, *b;
    atomic_llong count;
} named_counter;

struct metrics {
    pthread_mutex_t grow; /* taken only to add a new series */
    request_series series[MAX_SERIES];
    atomic_int series_count;
    route_latency latency[MAX_ROUTE_HISTOGRAMS];
    atomic_int latency_count;
    atomic_llong replays, rate_limited;
    named_counter idem_conflicts[4];
    named_counter processor_calls[32]; /* operations × outcomes */
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

static route_latency *find_latency(metrics *m, const char *route)
{
    int n = atomic_load(&m->latency_count);
    for (int i = 0; i < n; i++)
        if (m->latency[i].route == route || !strcmp(m->latency[i].route, route))
            return &m->latency[i];
    return NULL;
}

static void observe_latency(metrics *m, const char *route, double duration_ms)
{
    route_latency *h = find_latency(m, route);
    if (!h) {
        pthread_mutex_lock(&m->grow);
        h = find_latency(m, route);
        int n = atomic_load(&m->latency_count);
        if (!h && n < MAX_ROUTE_HISTOGRAMS) {
            h = &m->latency[n];
            h->route = route;
            atomic_store(&m->latency_count, n + 1);
        }
        pthread_mutex_unlock(&m->grow);
    }
    if (!h)
        return;
    size_t b = 0;
    while (b < LATENCY_BUCKETS && duration_ms > latency_bounds_ms[b])
        b++;
    atomic_fetch_add(&h->buckets[b], 1);
    atomic_fetch_add(&h->sum_us, (long long)(duration_ms * 1000));
    atomic_fetch_add(&h->count, 1);
}

/* A closed set of method labels, so no client can add series by inventing methods. */
static const char *method_label(const char *method)
{
    static const char *const known[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};
    for (size_t i = 0; method && i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(method, known[i]))
            return known[i];
    return "other";
}

void metrics_observe_request(metrics *m, const char *route, const char *method, int status,
                             double duration_ms)
{
    method = method_label(method);
    if (!route)
        route = "unmatched";
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
    observe_latency(m, route, duration_ms);
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
    count_named(m, m->processor_calls, 32, operation, outcome);
}

/* Seconds since the epoch when this process started: its start in clock ticks after boot
 * (/proc/self/stat, field 22) plus the boot time (/proc/stat btime). 0 when unknown. */
static double process_start_time(void)
{
    char stat[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    size_t len = f ? fread(stat, 1, sizeof stat - 1, f) : 0;
    if (f)
        fclose(f);
    stat[len] = '\0';
    /* The command name (field 2) may hold spaces: count fields after its closing ')'. */
    const char *p = strrchr(stat, ')');
    unsigned long long start_ticks = 0;
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (!p || sscanf(p + 1, "%llu", &start_ticks) != 1)
        return 0;
    unsigned long long boot = 0;
    char line[256];
    f = fopen("/proc/stat", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &boot) == 1)
            break;
    if (f)
        fclose(f);
    long hz = sysconf(_SC_CLK_TCK);
    return boot && hz > 0 ? (double)boot + (double)start_ticks / (double)hz : 0;
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

/* A label value in the exposition format's escaping: backslash, double quote and newline. */
static void put_label_value(text *t, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            put(t, "\\%c", *v);
        else if (*v == '\n')
            put(t, "\\n");
        else
            put(t, "%c", *v);
    }
}

static void render_latency(text *t, metrics *m)
{
    put(t, "# HELP payd_http_request_duration_seconds Request latency by route pattern.\n"
           "# TYPE payd_http_request_duration_seconds histogram\n");
    int n = atomic_load(&m->latency_count);
    for (int i = 0; i < n; i++) {
        route_latency *h = &m->latency[i];
        long long cumulative = 0;
        for (size_t b = 0; b < LATENCY_BUCKETS; b++) {
            cumulative += atomic_load(&h->buckets[b]);
            put(t, "payd_http_request_duration_seconds_bucket{route=\"");
            put_label_value(t, h->route);
            put(t, "\",le=\"%g\"} %lld\n", latency_bounds_ms[b] / 1000, cumulative);
        }
        cumulative += atomic_load(&h->buckets[LATENCY_BUCKETS]);
        put(t, "payd_http_request_duration_seconds_bucket{route=\"");
        put_label_value(t, h->route);
        put(t, "\",le=\"+Inf\"} %lld\n", cumulative);
        put(t, "payd_http_request_duration_seconds_sum{route=\"");
        put_label_value(t, h->route);
        put(t, "\"} %.6f\n", (double)atomic_load(&h->sum_us) / 1e6);
        put(t, "payd_http_request_duration_seconds_count{route=\"");
        put_label_value(t, h->route);
        put(t, "\"} %lld\n", atomic_load(&h->count));
    }
}

/* Buckets 1, 2, 4, ... up to the first power of two that holds --max-batch, so the largest
 * batch the writer can make has a bucket of its own below +Inf. */
static void render_batch_sizes(text *t, const store_stats *st, int64_t max_batch)
{
    put(t, "# HELP payd_store_commit_batch_size Write jobs per committed transaction.\n"
           "# TYPE payd_store_commit_batch_size histogram\n");
    long long cumulative = 0;
    for (int b = 0; b < STORE_BATCH_BUCKETS; b++) {
        cumulative += st->batch_size_buckets[b];
        if (b < STORE_BATCH_BUCKETS - 1 && (1LL << b) < max_batch * 2)
            put(t, "payd_store_commit_batch_size_bucket{le=\"%lld\"} %lld\n", 1LL << b, cumulative);
    }
    put(t, "payd_store_commit_batch_size_bucket{le=\"+Inf\"} %lld\n", cumulative);
    put(t, "payd_store_commit_batch_size_sum %lld\npayd_store_commit_batch_size_count %lld\n",
        (long long)st->jobs, (long long)st->batches);
}

static void render_build_info(text *t)
{
    put(t,
        "# HELP payd_build_info The version and git revision payd was built from.\n"
        "# TYPE payd_build_info gauge\n"
        "payd_build_info{version=\"%s\",revision=\"%s\"} 1\n",
        payd_version, payd_revision);
}

/* The process_* series every Prometheus client library exports, read from /proc. */
static void render_process(text *t)
{
    struct rusage usage;
    if (getrusage(RUSAGE_SELF, &usage) == 0)
        put(t,
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in "
            "seconds.\n"
            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.6f\n",
            (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6);

    long page = sysconf(_SC_PAGESIZE);
    unsigned long long virtual_pages = 0, resident_pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%llu %llu", &virtual_pages, &resident_pages) == 2)
            put(t,
                "# HELP process_resident_memory_bytes Resident memory size in bytes.\n"
                "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes "
                "%llu\n"
                "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n"
                "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes "
                "%llu\n",
                resident_pages * (unsigned long long)page,
                virtual_pages * (unsigned long long)page);
        fclose(f);
    }

    DIR *fds = opendir("/proc/self/fd");
    if (fds) {
        long open_fds = 0;
        for (struct dirent *e; (e = readdir(fds));)
            open_fds += e->d_name[0] != '.';
        closedir(fds);
        put(t,
            "# HELP process_open_fds Number of open file descriptors.\n"
            "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n",
            open_fds - 1); /* not the one opendir itself holds */
    }
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
        put(t,
            "# HELP process_max_fds Maximum number of open file descriptors.\n"
            "# TYPE process_max_fds gauge\nprocess_max_fds %llu\n",
            (unsigned long long)limit.rlim_cur);

    double start = process_start_time();
    if (start > 0)
        put(t,
            "# HELP process_start_time_seconds Start time of the process since unix epoch in "
            "seconds.\n"
            "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.2f\n",
            start);
}

char *metrics_render(metrics *m, app *a)
{
    text t = {.buf = malloc(8192), .cap = 8192};
    put(&t, "# HELP payd_http_requests_total HTTP requests by route pattern, method and status "
            "code.\n"
            "# TYPE payd_http_requests_total counter\n");
    int n = atomic_load(&m->series_count);
    for (int i = 0; i < n; i++) {
        put(&t, "payd_http_requests_total{route=\"");
        put_label_value(&t, m->series[i].route);
        put(&t, "\",method=\"");
        put_label_value(&t, m->series[i].method);
        put(&t, "\",code=\"%d\"} %lld\n", m->series[i].status, atomic_load(&m->series[i].count));
    }

    render_latency(&t, m);

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
    if (a->rate_store)
        put(&t,
            "# HELP payd_rate_limit_store_up 1 while the shared rate-limit store (Redis) answers, "
            "0 while this node limits locally.\n"
            "# TYPE payd_rate_limit_store_up gauge\npayd_rate_limit_store_up %d\n",
            rate_store_up(a->rate_store));
    put(&t,
        "# HELP payd_database_up 1 while the database answers, 0 while it cannot be reached.\n"
        "# TYPE payd_database_up gauge\npayd_database_up %d\n",
        store_available(a->store) ? 1 : 0);
    put(&t, "# HELP payd_processor_calls_total Processor calls by operation and outcome.\n"
            "# TYPE payd_processor_calls_total counter\n");
    for (int i = 0; i < 32 && m->processor_calls[i].a; i++)
        put(&t, "payd_processor_calls_total{operation=\"%s\",outcome=\"%s\"} %lld\n",
            m->processor_calls[i].a, m->processor_calls[i].b,
            atomic_load(&m->processor_calls[i].count));

    put(&t,
        "# HELP payd_schema_version The database schema's version, as this node last migrated "
        "it (0: not yet, the database was away).\n"
        "# TYPE payd_schema_version gauge\npayd_schema_version %d\n",
        store_schema_version());
    store_stats st;
    store_get_stats(a->store, &st);
    render_batch_sizes(&t, &st, a->cfg.group_commit ? a->cfg.max_batch : 1);
    put(&t,
        "# HELP payd_store_failed_commits_total Transactions that failed to commit.\n"
        "# TYPE payd_store_failed_commits_total counter\npayd_store_failed_commits_total "
        "%lld\n",
        (long long)st.failed_commits);
    put(&t,
        "# HELP payd_store_batch_retries_total Write batches run again: busy after a deadlock or "
        "serialization failure (PostgreSQL), careful with a savepoint per job after a job "
        "failed.\n"
        "# TYPE payd_store_batch_retries_total counter\n"
        "payd_store_batch_retries_total{reason=\"busy\"} %lld\n"
        "payd_store_batch_retries_total{reason=\"careful\"} %lld\n",
        (long long)st.busy_retries, (long long)st.careful_reruns);
    put(&t,
        "# HELP payd_store_unsynced_commits_total Commits that did not wait for the disk (SQLite: "
        "the builtin processor's charges; the synced commit after them makes them durable).\n"
        "# TYPE payd_store_unsynced_commits_total counter\npayd_store_unsynced_commits_total "
        "%lld\n",
        (long long)st.unsynced_batches);
    put(&t,
        "# HELP payd_store_checkpoints_total WAL checkpoints (SQLite: each copies the WAL into the "
        "database and flushes it; about one per 1,000 pages written).\n"
        "# TYPE payd_store_checkpoints_total counter\npayd_store_checkpoints_total %lld\n",
        (long long)st.checkpoints);
    put(&t,
        "# HELP payd_store_queue_depth Write jobs waiting for the writer.\n"
        "# TYPE payd_store_queue_depth gauge\npayd_store_queue_depth %lld\n",
        (long long)st.queue_depth);
    put(&t,
        "# HELP payd_requests_in_flight Requests waiting on a worker.\n"
        "# TYPE payd_requests_in_flight gauge\npayd_requests_in_flight %d\n",
        atomic_load(&a->in_flight));
    render_build_info(&t);
    render_process(&t);
    return t.buf;
}

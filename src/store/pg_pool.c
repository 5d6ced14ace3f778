/* PostgreSQL: the writer and reader connection pools, loss of the database and
 * reconnection, and the guard against a stale primary's timeline. */

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/cpus.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "store/store_internal.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS   2000 /* a node is ready within ~2 s of the database's return */

static void pg_pool_init(pg_pool *p, const char *name, int max)
{
    p->name = name;
    p->max = max;
    p->idle = calloc((size_t)max, sizeof *p->idle);
    p->idle_since_ns = calloc((size_t)max, sizeof *p->idle_since_ns);
    pthread_cond_init(&p->freed, NULL);
}

void pg_pool_destroy(pg_pool *p)
{
    for (int i = 0; i < p->idle_count; i++)
        db_close(p->idle[i]);
    free(p->idle);
    free(p->idle_since_ns);
    if (p->max)
        pthread_cond_destroy(&p->freed);
}

/* Closes idle connections: all of them (the database was lost), or those idle too long.
 * Called with pool_lock held; the closes are quick (a socket close). */
static void pg_pool_trim(store *s, pg_pool *p, bool all)
{
    int64_t cutoff = store_clock_ns() - s->opt.idle_timeout_ms * 1000000;
    int keep = 0;
    for (int i = 0; i < p->idle_count; i++) {
        if (all || p->idle_since_ns[i] < cutoff || db_tag(p->idle[i]) != s->generation) {
            db_close(p->idle[i]);
            p->open--;
        } else {
            p->idle[keep] = p->idle[i];
            p->idle_since_ns[keep++] = p->idle_since_ns[i];
        }
    }
    if (keep < p->idle_count) /* room to open new ones: wake whoever waits for one */
        pthread_cond_broadcast(&p->freed);
    p->idle_count = keep;
}

/* With pool_lock held: the database was lost. */
static void mark_down(store *s, const char *error)
{
    s->generation++;
    pg_pool_trim(s, &s->writer_pool, true);
    pg_pool_trim(s, &s->reader_pool, true);
    if (error)
        snprintf(s->last_error, sizeof s->last_error, "%s", error);
    if (atomic_exchange(&s->up, false)) {
        s->down_since_ns = store_clock_ns();
        s->backoff_ms = BACKOFF_FIRST_MS;
        s->next_probe_ns = 0; /* the first reconnection attempt is immediate */
        log_error("error", "database connection lost", s->last_error);
    }
}

static int first_connect(store *s, db_conn *db, char *err, size_t errlen)
{
    if (store_migrate(db, err, errlen) != 0)
        return -1;
    if (s->opt.on_first_connect && s->opt.on_first_connect(db, s->opt.on_first_connect_arg) != 0) {
        snprintf(err, errlen, "start-up work on the database failed: %s", db_last_error(db));
        return -1;
    }
    return 0;
}

/* The timeline the server writes on, from its current WAL file's name; 0 on a standby (or if
 * it cannot be read), which the check below leaves alone. */
static int64_t primary_timeline(db_conn *c)
{
    db_stmt *st = db_query(c,
                           "SELECT CASE WHEN pg_is_in_recovery() THEN 0 ELSE ('x' || "
                           "substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int "
                           "END",
                           "");
    int64_t timeline = db_step(st) == DB_ROW ? db_int(st, 0) : 0;
    db_done(st);
    return timeline;
}

/* With pool_lock held: a primary on an older timeline than one payd has written on is a
 * former primary that has not yet noticed its demotion (paused, partitioned): what it commits
 * is rewound away once it does. Its connection is refused (503 and retry, like a lost
 * database). A newer timeline means a failover: connections opened before it are retired. */
static bool timeline_refused(store *s, int64_t timeline, char *err, size_t errlen)
{
    if (timeline <= 0)
        return false;
    if (timeline < s->timeline) {
        snprintf(err, errlen,
                 "refused a PostgreSQL primary on timeline %lld, older than timeline %lld",
                 (long long)timeline, (long long)s->timeline);
        if (s->refused_timeline != timeline) {
            s->refused_timeline = timeline;
            log_error("error", "stale PostgreSQL primary refused", err);
        }
        return true;
    }
    if (timeline > s->timeline) {
        if (s->timeline) {
            jsonw line;
            log_begin(&line, "info", "PostgreSQL primary on a new timeline");
            jw_key(&line, "timeline");
            jw_int(&line, timeline);
            jw_key(&line, "previous");
            jw_int(&line, s->timeline);
            log_end(&line);
            s->generation++;
        }
        s->timeline = timeline;
    }
    return false;
}

/* Opens a connection, outside pool_lock. The first that works after a loss (or at start)
 * brings the store up; a failure while down pushes the next attempt back. */
static db_conn *pg_connect(store *s)
{
    char err[256];
    db_conn *c = db_open_pg(s->url, &s->settings, err, sizeof err);
    int64_t timeline = c ? primary_timeline(c) : 0;
    pthread_mutex_lock(&s->pool_lock);
    if (c && timeline_refused(s, timeline, err, sizeof err)) {
        db_close(c);
        c = NULL;
    }
    bool need_bootstrap = c && !s->bootstrapped;
    pthread_mutex_unlock(&s->pool_lock);
    if (need_bootstrap && first_connect(s, c, err, sizeof err) != 0) {
        db_close(c);
        c = NULL;
    }
    pthread_mutex_lock(&s->pool_lock);
    if (c) {
        s->bootstrapped = true;
        db_set_tag(c, s->generation);
        if (!atomic_exchange(&s->up, true) && s->down_since_ns) {
            jsonw line;
            log_begin(&line, "info", "database connection restored");
            jw_key(&line, "down_ms");
            jw_int(&line, (store_clock_ns() - s->down_since_ns) / 1000000);
            log_end(&line);
        }
    } else if (!atomic_load(&s->up)) {
        /* still down: the next attempt waits longer (the loss was logged once already) */
        snprintf(s->last_error, sizeof s->last_error, "%s", err);
        s->next_probe_ns = store_clock_ns() + s->backoff_ms * 1000000;
        s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
    } else if (!strstr(err, "too many clients") && !strstr(err, "connection slots are reserved")) {
        /* up until now, but the server cannot be reached: lost (and retried with backoff) */
        mark_down(s, err);
        s->next_probe_ns = store_clock_ns() + s->backoff_ms * 1000000;
    }
    /* up, but the server refused a new connection for want of slots (its max_connections):
     * this caller fails; the connections already open go on serving */
    pthread_mutex_unlock(&s->pool_lock);
    return c;
}

/* A connection from pool p, or NULL with the reason noted on the thread: the database is down
 * (and no reconnection attempt is due, or it failed), or none came free within the pool
 * timeout. */
/* Closes a pooled connection that broke (pool_lock held); one of the current generation takes
 * the store down, so the others are reconnected too. */
static void pg_pool_drop(store *s, pg_pool *p, db_conn *c)
{
    char error[256];
    snprintf(error, sizeof error, "%s", db_last_error(c));
    bool current = db_tag(c) == s->generation;
    db_close(c);
    p->open--;
    if (current)
        mark_down(s, error);
}

db_conn *pg_pool_take(store *s, pg_pool *p)
{
    int64_t deadline = store_clock_ns() + s->opt.pool_timeout_ms * 1000000;
    pthread_mutex_lock(&s->pool_lock);
    for (;;) {
        bool up = atomic_load(&s->up);
        if (!up && (s->probing || store_clock_ns() < s->next_probe_ns)) {
            pthread_mutex_unlock(&s->pool_lock);
            db_note_failure(DB_FAILURE_UNAVAILABLE);
            return NULL;
        }
        if (up && p->idle_count) {
            db_conn *c = p->idle[--p->idle_count];
            if (db_tag(c) == s->generation && db_idle_alive(c)) {
                pthread_mutex_unlock(&s->pool_lock);
                return c;
            }
            /* opened before the database was lost, or closed by the server while idle: the
             * others are likely gone too, so the store goes down and reconnects */
            pg_pool_drop(s, p, c);
            continue;
        }
        if (p->open < p->max) {
            p->open++;
            if (!up)
                s->probing = true;
            pthread_mutex_unlock(&s->pool_lock);
            db_conn *c = pg_connect(s);
            pthread_mutex_lock(&s->pool_lock);
            if (!up)
                s->probing = false;
            if (!c) {
                p->open--;
                pthread_cond_broadcast(&p->freed);
                pthread_mutex_unlock(&s->pool_lock);
                db_note_failure(DB_FAILURE_UNAVAILABLE);
                return NULL;
            }
            pthread_mutex_unlock(&s->pool_lock);
            return c;
        }
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        int64_t left = deadline - store_clock_ns();
        if (left <= 0) {
            pthread_mutex_unlock(&s->pool_lock);
            db_note_failure(DB_FAILURE_TIMEOUT);
            return NULL;
        }
        int64_t ns = until.tv_nsec + left;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&p->freed, &s->pool_lock, &until);
    }
}

/* Back to the pool; a broken connection is closed and the database marked lost. */
void pg_pool_give(store *s, pg_pool *p, db_conn *c)
{
    pthread_mutex_lock(&s->pool_lock);
    if (db_broken(c)) {
        pg_pool_drop(s, p, c);
    } else if (db_tag(c) != s->generation) {
        db_close(c);
        p->open--;
    } else {
        p->idle[p->idle_count] = c;
        p->idle_since_ns[p->idle_count++] = store_clock_ns();
        /* both pools: a node that stopped writing still closes its idle writers */
        pg_pool_trim(s, &s->writer_pool, false);
        pg_pool_trim(s, &s->reader_pool, false);
    }
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&s->pool_lock);
}

bool store_available(store *s)
{
    return s->kind == DB_SQLITE || atomic_load(&s->up);
}

int store_pg_start(store *s, char *err, size_t errlen)
{
    int budget = s->opt.max_connections > 0 ? s->opt.max_connections : 2 * s->opt.writer_conns;
    if (budget < 2)
        budget = 2;
    /* a quarter for writers, and no more than one per CPU and one to wait on its commit: all
     * of a batch's jobs share a writer, and writers the CPUs cannot run only split batches
     * into more commits (fresh-key payments on 2 cores: 3 writers measured 4-7 % above 5);
     * readers are lent per request and are wanted by many */
    int writers = s->opt.max_connections > 0 ? (budget + 3) / 4 : s->opt.writer_conns;
    int cpus = cpus_available();
    if (s->opt.max_connections > 0 && writers > cpus + 1)
        writers = cpus + 1;
    pg_pool_init(&s->writer_pool, "writer", writers);
    pg_pool_init(&s->reader_pool, "reader", budget - writers);
    s->settings = (db_pg_settings){
        .application_name = s->application_name[0] ? s->application_name : NULL,
        .connect_timeout_s = 3,
        .statement_timeout_ms = s->opt.statement_timeout_ms,
        .lock_timeout_ms = s->opt.lock_timeout_ms,
        .no_prepare = s->opt.no_prepare,
    };
    s->backoff_ms = BACKOFF_FIRST_MS;
    s->down_since_ns = store_clock_ns();
    /* the first connection migrates the schema; at start it is the caller's to see fail */
    s->writer_pool.open++;
    db_conn *first = db_open_pg(s->url, &s->settings, err, errlen);
    if (first && first_connect(s, first, err, errlen) != 0) {
        db_close(first);
        first = NULL;
    }
    if (!first) {
        s->writer_pool.open--;
        if (!s->opt.wait_for_database)
            return -1;
        snprintf(s->last_error, sizeof s->last_error, "%s", err);
        log_error("error", "database unavailable at start; retrying", err);
        s->next_probe_ns = store_clock_ns() + s->backoff_ms * 1000000;
        return 0;
    }
    s->bootstrapped = true;
    s->timeline = primary_timeline(first);
    atomic_store(&s->up, true);
    pg_pool_give(s, &s->writer_pool, first);
    return 0;
}

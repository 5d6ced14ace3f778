#include "store/store.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "store/write_health.h"

typedef struct write_job {
    write_job_fn fn;
    void *ctx;
    int result;
    char error[200];    /* the database's reason when result is STORE_FAILED */
    db_failure failure; /* PostgreSQL: why the database failed it, for the caller's thread */
    int64_t queued_ns;  /* PostgreSQL: a job that waited past the pool timeout is refused */
    sem_t *done;        /* store_write: its caller waits on it */
    write_done_fn then; /* store_submit: called on the writer thread instead */
    void *then_arg;
    enum { FAULT_UNASKED, FAULT_NONE, FAULT_FAIL } fault; /* asked once per job, not per run */
    /* store_submit_unsynced: committed without waiting for the disk */
    bool unsynced;
    struct write_job *next;
} write_job;

/* A job's batch has ended: its caller wakes, or (store_submit) its continuation runs here, on
 * the writer's thread, and the job is freed. */
static void job_finished(write_job *job)
{
    if (!job->then) {
        sem_post(job->done);
        return;
    }
    job->then(job->result, job->failure, job->error, job->then_arg);
    free(job);
}

#define MAX_READERS 1024
/* SQLite checkpoints once the WAL holds this many pages (its own default) */
#define WAL_CHECKPOINT_PAGES 1000

/* An SQLite reader connection and which thread may use it (see "readers" below). */
enum { READER_FREE, READER_IN_USE, READER_PARKED, READER_ENDING };

typedef struct reader_slot {
    db_conn *conn;
    atomic_int state;
    int64_t checkpoint_edges; /* store.checkpoint_edges when its thread took it */
} reader_slot;

#define PG_ATTEMPTS 10
/* PostgreSQL: how long a job in a batch of several waits for a row lock before it is run again
 * (see the group commit's notes) */
#define BATCH_LOCK_WAIT_MS 50

/* PostgreSQL: a pool of idle connections (a stack: the most recently used is reused first, so
 * the oldest idle ones age out and are closed). */
typedef struct pg_pool {
    const char *name;
    db_conn **idle;
    int64_t *idle_since_ns;
    int idle_count;
    int open; /* idle + lent out + being opened */
    int max;
    pthread_cond_t freed;
} pg_pool;

struct store {
    store_options opt;
    char url[512];
    db_kind kind;

    pthread_mutex_t lock;
    pthread_cond_t has_work;
    write_job *head, *tail;
    int64_t depth;
    bool stopping;
    pthread_t writer;
    bool writer_started;
    pthread_t *pg_writers; /* PostgreSQL: one batch writer per write connection */
    int pg_writer_count;
    db_conn *writer_db;

    /* PostgreSQL: writers (one transaction per job) and readers, one budget, under pool_lock */
    pthread_mutex_t pool_lock;
    pg_pool writer_pool, reader_pool;
    db_pg_settings settings;
    char application_name[64];
    int64_t generation;    /* bumped when the database is lost: older connections are dropped */
    atomic_bool up;        /* the database answers */
    bool bootstrapped;     /* migrations and on_first_connect have run */
    bool probing;          /* one caller is trying to reconnect */
    int64_t down_since_ns; /* when it was lost */
    int64_t next_probe_ns; /* no reconnection attempt before this */
    int64_t backoff_ms;
    char last_error[256];
    /* the newest PostgreSQL timeline a connection found its primary on, and the older one
     * last refused (logged once): docs/operations.md, "Failover" */
    int64_t timeline, refused_timeline;

    /* readers: SQLite one per thread (a reader_slot), PostgreSQL one per request (lent from
     * the pool) */
    pthread_key_t reader_key;
    reader_slot *readers[MAX_READERS];
    int reader_count;
    atomic_llong checkpoint_edges; /* checkpoints begun plus checkpoints finished */

    store_stats stats;
    write_health health; /* store_writes_failing */
};

/* ---- additions held until the batch commits (store_add_at_commit) ---- */

typedef struct held_adds {
    bool active; /* this thread is running a batch */
    store_add *items;
    int count, cap;
} held_adds;
static _Thread_local held_adds held;

/* The addition as a statement; its parameters go to values[0..STORE_ADD_VALUES). */
static db_command add_command(const store_add *a, db_value *values)
{
    for (int i = 0; i < a->count; i++)
        values[i] = (db_value){.type = 'i', .i = a->value[i]};
    return (db_command){.sql = a->sql, .params = values, .count = a->count};
}

static int compare_adds(const void *pa, const void *pb);

int64_t store_held_sum(const store_add *add, int value)
{
    int64_t sum = 0;
    for (int i = 0; i < held.count; i++)
        if (compare_adds(add, &held.items[i]) == 0 &&
            __builtin_add_overflow(sum, held.items[i].value[value], &sum))
            return INT64_MAX;
    return sum;
}

db_status store_add_at_commit(db_conn *db, const store_add *add)
{
    if (!held.active) {
        db_value values[STORE_ADD_VALUES];
        db_command cmd = add_command(add, values);
        return db_exec_all(db, &cmd, 1);
    }
    if (held.count == held.cap) {
        held.cap = held.cap ? held.cap * 2 : 64;
        held.items = realloc(held.items, (size_t)held.cap * sizeof *held.items);
    }
    held.items[held.count++] = *add;
    return DB_DONE;
}

/* The row order: rank, statement text, then the key values. Equal for one row. */
static int compare_adds(const void *pa, const void *pb)
{
    const store_add *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    int c = a->sql == b->sql ? 0 : strcmp(a->sql, b->sql);
    if (c)
        return c;
    for (int i = 0; i < a->count; i++)
        if (a->kind[i] == ADD_KEY && a->value[i] != b->value[i])
            return a->value[i] < b->value[i] ? -1 : 1;
    return 0;
}

/* The batch's held additions, one statement per row, then COMMIT: one round trip on
 * PostgreSQL, so a hot row stays locked for little more than the commit itself. */
static db_status commit_with_held_adds(db_conn *db)
{
    if (held.count > 1)
        qsort(held.items, (size_t)held.count, sizeof *held.items, compare_adds);
    int rows = 0; /* merged in place: items[0..rows) */
    for (int i = 0; i < held.count;) {
        store_add row = held.items[i++];
        for (; i < held.count && compare_adds(&row, &held.items[i]) == 0; i++)
            for (int v = 0; v < row.count; v++) {
                int64_t x = held.items[i].value[v];
                if (row.kind[v] == ADD_SUM)
                    row.value[v] += x;
                else if (row.kind[v] == ADD_MAX && x > row.value[v])
                    row.value[v] = x;
            }
        held.items[rows++] = row;
    }
    db_value *values = calloc((size_t)rows * STORE_ADD_VALUES + 1, sizeof *values);
    db_command *cmds = calloc((size_t)rows + 2, sizeof *cmds);
    int n = 0;
    /* the additions lock their rows in one order, so they never wait in a circle: they wait
     * for another batch's commit as long as the session allows (BATCH_LOCK_WAIT_MS is for the
     * jobs' own locks) */
    const char *lift = rows ? db_lock_wait_lift(db) : NULL;
    if (lift)
        cmds[n++] = (db_command){.sql = lift};
    for (int r = 0; r < rows; r++)
        cmds[n++] = add_command(&held.items[r], &values[r * STORE_ADD_VALUES]);
    cmds[n++] = (db_command){.sql = "COMMIT"};
    db_status rc = db_exec_all(db, cmds, n);
    free(cmds);
    free(values);
    held.count = 0;
    return rc;
}

/* Each thread waits for its jobs on its own semaphore: no shared condition to stampede on. */
static _Thread_local sem_t job_done_sem;
static _Thread_local bool job_done_sem_ready;

static sem_t *thread_semaphore(void)
{
    if (!job_done_sem_ready) {
        sem_init(&job_done_sem, 0, 0);
        job_done_sem_ready = true;
    }
    return &job_done_sem;
}

db_kind store_kind(const store *s)
{
    return s->kind;
}

/* The smallest b with n <= 2^b (see store_stats). */
static store_faults faults;

void store_set_faults(const store_faults *f)
{
    faults = f ? *f : (store_faults){0};
}

/* Runs a job's function. A job may run more than once (a batch run again with savepoints); an
 * injected failure is the job's, so every run of it meets the same one. The database failure
 * its last run met (SQLite: a full disk, an I/O error) is kept for its caller's answer. */
static int run_job(db_conn *db, write_job *job)
{
    if (job->fault == FAULT_UNASKED)
        job->fault = faults.fail_job && faults.fail_job() ? FAULT_FAIL : FAULT_NONE;
    if (job->fault == FAULT_FAIL)
        return DB_ERROR;
    db_failure before = db_thread_failure();
    db_thread_failure_reset();
    int rc = job->fn(db, job->ctx);
    job->failure = db_thread_failure();
    db_note_failure(before);
    return rc;
}

/* After a batch: each job's caller learns the failure to answer with, and the store whether the
 * database writes (store/write_health.h). */
static void settle_batch_failures(store *s, write_job **jobs, int n)
{
    bool kept = false, failing = false;
    for (int i = 0; i < n; i++) {
        kept |= jobs[i]->result == 0;
        failing |= write_failed_for_database(jobs[i]->result, jobs[i]->failure);
        jobs[i]->failure = write_failure_for_caller(jobs[i]->result, jobs[i]->failure);
    }
    write_health_note(&s->health, kept, failing);
}

bool store_writes_failing(store *s)
{
    return write_health_failing(&s->health);
}

static db_status commit(db_conn *db)
{
    if (faults.at_commit)
        faults.at_commit(false);
    db_status rc = commit_with_held_adds(db);
    if (faults.at_commit && rc == DB_DONE)
        faults.at_commit(true);
    return rc;
}

static int batch_bucket(int n)
{
    int b = 0;
    while ((1 << b) < n && b < STORE_BATCH_BUCKETS - 1)
        b++;
    return b;
}

/* Jobs back to back in the open transaction, no savepoint: true when every one succeeded. A
 * savepoint per job costs two statements and a copy of each page the job is first to touch in
 * it, and nearly every job succeeds; when one fails, everything is rolled back (nothing was
 * committed) and the batch runs again carefully. Jobs are pure functions of their context, so
 * running one again is safe (the PostgreSQL writers below do the same). */
static bool run_back_to_back(db_conn *db, write_job **jobs, int n)
{
    for (int i = 0; i < n; i++) {
        jobs[i]->result = run_job(db, jobs[i]);
        if (jobs[i]->result != 0) {
            db_exec(db, "ROLLBACK", "");
            return false;
        }
    }
    return true;
}

/* Each job in its own savepoint, so a job that fails has only its own writes rolled back. */
static void run_with_savepoints(db_conn *db, write_job **jobs, int n)
{
    for (int i = 0; i < n; i++) {
        db_exec(db, "SAVEPOINT job", "");
        int mark = held.count;
        jobs[i]->result = run_job(db, jobs[i]);
        if (jobs[i]->result != 0) {
            held.count = mark; /* what the job held goes with its writes */
            db_exec(db, "ROLLBACK TO job", "");
        }
        db_exec(db, "RELEASE job", "");
    }
}

/* With s->lock held: moves up to max queued jobs into jobs, oldest first; returns how many. */
static int take_queued(store *s, write_job **jobs, int max)
{
    int n = 0;
    while (s->head && n < max) {
        jobs[n++] = s->head;
        s->head = s->head->next;
    }
    if (!s->head)
        s->tail = NULL;
    s->depth -= n;
    return n;
}

/* One batch: BEGIN, the jobs, COMMIT. A single job is the transaction itself: its failure
 * rolls it back and is its answer. Jobs queued while the batch's own ran join a synced batch
 * before the COMMIT (up to --max-batch): they would otherwise wait for this commit and then
 * their own, and a payment's jobs each wait so. An unsynced batch (store_submit_unsynced jobs
 * only) commits without waiting for the disk and takes no other job. */
static void run_batch(store *s, write_job **jobs, int n, bool synced)
{
    db_conn *db = s->writer_db;
    held.count = 0;
    /* a failure to set how this commit syncs fails the batch: a synced batch must never
     * commit unsynced */
    bool ok = db_sync_commits(db, synced) == DB_DONE && db_begin(db) == DB_DONE;
    bool clean = false;
    if (ok && n == 1) {
        jobs[0]->result = run_job(db, jobs[0]);
        if (jobs[0]->result != 0) {
            db_exec(db, "ROLLBACK", "");
            goto finished;
        }
        clean = true;
    } else if (ok) {
        clean = run_back_to_back(db, jobs, n);
    }
    while (clean && synced && n < s->opt.max_batch) {
        pthread_mutex_lock(&s->lock);
        int joined = take_queued(s, jobs + n, s->opt.max_batch - n);
        pthread_mutex_unlock(&s->lock);
        if (!joined)
            break;
        clean = run_back_to_back(db, jobs + n, joined);
        n += joined;
    }
    if (ok && !clean) {
        pthread_mutex_lock(&s->lock);
        s->stats.careful_reruns++;
        pthread_mutex_unlock(&s->lock);
        held.count = 0;
        ok = db_begin(db) == DB_DONE;
        if (ok)
            run_with_savepoints(db, jobs, n);
    }
    if (!ok || commit(db) != DB_DONE) {
        log_error("error", "batch commit failed", db_last_error(db));
        for (int i = 0; i < n; i++) {
            jobs[i]->result = STORE_FAILED;
            snprintf(jobs[i]->error, sizeof jobs[i]->error, "%s", db_last_error(db));
        }
        db_exec(db, "ROLLBACK", "");
        s->stats.failed_commits++;
    }
finished:
    pthread_mutex_lock(&s->lock);
    s->stats.unsynced_batches += !synced;
    s->stats.jobs += n;
    s->stats.batches++;
    s->stats.batch_size_buckets[batch_bucket(n)]++;
    pthread_mutex_unlock(&s->lock);
    settle_batch_failures(s, jobs, n);
    for (int i = 0; i < n; i++)
        job_finished(jobs[i]);
}

static void pg_run_batch(store *s, write_job **jobs, int n);
static void pg_start_writers(store *s);

/* Moves the jobs that need no sync of their own to the front, keeping each group's order;
 * returns how many there are. */
static int unsynced_first(write_job **jobs, int n)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (!jobs[i]->unsynced)
            continue;
        write_job *j = jobs[i];
        memmove(jobs + k + 1, jobs + k, (size_t)(i - k) * sizeof *jobs);
        jobs[k++] = j;
    }
    return k;
}

/* SQLite: the jobs that need no sync of their own commit first, without waiting for the disk,
 * and their continuations run at once: the jobs these submit (a payment's record after its
 * charge) join the synced batch that follows, whose fsync makes both durable. */
static void lite_run_batch(store *s, write_job **jobs, int n)
{
    /* one transaction per job (--group-commit=false, the naive way) syncs every commit */
    int k = s->opt.max_batch > 1 ? unsynced_first(jobs, n) : 0;
    if (k) {
        run_batch(s, jobs, k, false); /* finishes (and frees) jobs[0..k) */
        n -= k;
        /* the synced batch starts at the array's head: it fills the array up to --max-batch */
        memmove(jobs, jobs + k, (size_t)n * sizeof *jobs);
    }
    if (n)
        run_batch(s, jobs, n, true);
}

static int64_t clock_ns(void);

/* A write_probe's end: write_health_note has taken what it says. */
static void probe_written(int result, db_failure failure, const char *error, void *arg)
{
    (void)result, (void)failure, (void)error, (void)arg;
}

/* With s->lock held: waits for work; while writes fail, queues a probe after a second idle, so
 * the store learns that the database writes again even when no request comes to try: a node
 * taken out of rotation for it would otherwise never come back. */
static void wait_for_work(store *s)
{
    while (!s->head && !s->stopping) {
        if (!write_health_failing(&s->health)) {
            pthread_cond_wait(&s->has_work, &s->lock);
            continue;
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        if (pthread_cond_timedwait(&s->has_work, &s->lock, &until) == 0 || s->head || s->stopping)
            continue;
        write_job *probe = calloc(1, sizeof *probe);
        *probe = (write_job){.fn = write_probe, .then = probe_written, .queued_ns = clock_ns()};
        s->head = s->tail = probe;
        s->depth++;
    }
}

static void *writer_main(void *arg)
{
    store *s = arg;
    write_job **batch = calloc((size_t)s->opt.max_batch, sizeof *batch);
    held.active = true; /* every job on this thread runs in a batch */
    for (;;) {
        pthread_mutex_lock(&s->lock);
        wait_for_work(s);
        if (!s->head && s->stopping) {
            pthread_mutex_unlock(&s->lock);
            break;
        }
        int n = take_queued(s, batch, s->opt.max_batch);
        pthread_mutex_unlock(&s->lock);
        if (s->kind == DB_POSTGRES)
            pg_run_batch(s, batch, n);
        else
            lite_run_batch(s, batch, n);
    }
    free(batch);
    free(held.items);
    return NULL;
}

/* ---- PostgreSQL: connection pools, loss and reconnection ---- */

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS   2000 /* a node is ready within ~2 s of the database's return */

static int64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void pool_init(pg_pool *p, const char *name, int max)
{
    p->name = name;
    p->max = max;
    p->idle = calloc((size_t)max, sizeof *p->idle);
    p->idle_since_ns = calloc((size_t)max, sizeof *p->idle_since_ns);
    pthread_cond_init(&p->freed, NULL);
}

static void pool_destroy(pg_pool *p)
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
static void pool_trim(store *s, pg_pool *p, bool all)
{
    int64_t cutoff = clock_ns() - s->opt.idle_timeout_ms * 1000000;
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
    pool_trim(s, &s->writer_pool, true);
    pool_trim(s, &s->reader_pool, true);
    if (error)
        snprintf(s->last_error, sizeof s->last_error, "%s", error);
    if (atomic_exchange(&s->up, false)) {
        s->down_since_ns = clock_ns();
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
            jw_int(&line, (clock_ns() - s->down_since_ns) / 1000000);
            log_end(&line);
        }
    } else if (!atomic_load(&s->up)) {
        /* still down: the next attempt waits longer (the loss was logged once already) */
        snprintf(s->last_error, sizeof s->last_error, "%s", err);
        s->next_probe_ns = clock_ns() + s->backoff_ms * 1000000;
        s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
    } else if (!strstr(err, "too many clients") && !strstr(err, "connection slots are reserved")) {
        /* up until now, but the server cannot be reached: lost (and retried with backoff) */
        mark_down(s, err);
        s->next_probe_ns = clock_ns() + s->backoff_ms * 1000000;
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
static void pool_drop(store *s, pg_pool *p, db_conn *c)
{
    char error[256];
    snprintf(error, sizeof error, "%s", db_last_error(c));
    bool current = db_tag(c) == s->generation;
    db_close(c);
    p->open--;
    if (current)
        mark_down(s, error);
}

static db_conn *pool_take(store *s, pg_pool *p)
{
    int64_t deadline = clock_ns() + s->opt.pool_timeout_ms * 1000000;
    pthread_mutex_lock(&s->pool_lock);
    for (;;) {
        bool up = atomic_load(&s->up);
        if (!up && (s->probing || clock_ns() < s->next_probe_ns)) {
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
            pool_drop(s, p, c);
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
        int64_t left = deadline - clock_ns();
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
static void pool_give(store *s, pg_pool *p, db_conn *c)
{
    pthread_mutex_lock(&s->pool_lock);
    if (db_broken(c)) {
        pool_drop(s, p, c);
    } else if (db_tag(c) != s->generation) {
        db_close(c);
        p->open--;
    } else {
        p->idle[p->idle_count] = c;
        p->idle_since_ns[p->idle_count++] = clock_ns();
        /* both pools: a node that stopped writing still closes its idle writers */
        pool_trim(s, &s->writer_pool, false);
        pool_trim(s, &s->reader_pool, false);
    }
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&s->pool_lock);
}

bool store_available(store *s)
{
    return s->kind == DB_SQLITE || atomic_load(&s->up);
}

static int pg_start(store *s, char *err, size_t errlen)
{
    int budget = s->opt.max_connections > 0 ? s->opt.max_connections : 2 * s->opt.writer_conns;
    if (budget < 2)
        budget = 2;
    /* a quarter for writers, and no more than one per core and one to wait on its commit: all
     * of a batch's jobs share a writer, and writers the cores cannot run only split batches
     * into more commits (fresh-key payments on 2 cores: 3 writers measured 4-7 % above 5);
     * readers are lent per request and are wanted by many */
    int writers = s->opt.max_connections > 0 ? (budget + 3) / 4 : s->opt.writer_conns;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (s->opt.max_connections > 0 && cores > 0 && writers > cores + 1)
        writers = (int)cores + 1;
    pool_init(&s->writer_pool, "writer", writers);
    pool_init(&s->reader_pool, "reader", budget - writers);
    s->settings = (db_pg_settings){
        .application_name = s->application_name[0] ? s->application_name : NULL,
        .connect_timeout_s = 3,
        .statement_timeout_ms = s->opt.statement_timeout_ms,
        .lock_timeout_ms = s->opt.lock_timeout_ms,
        .no_prepare = s->opt.no_prepare,
    };
    s->backoff_ms = BACKOFF_FIRST_MS;
    s->down_since_ns = clock_ns();
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
        s->next_probe_ns = clock_ns() + s->backoff_ms * 1000000;
        return 0;
    }
    s->bootstrapped = true;
    s->timeline = primary_timeline(first);
    atomic_store(&s->up, true);
    pool_give(s, &s->writer_pool, first);
    return 0;
}

static void around_checkpoint(void *arg);

store *store_open(const store_options *opt, char *err, size_t errlen)
{
    store *s = calloc(1, sizeof *s);
    s->opt = *opt;
    if (s->opt.max_batch < 1)
        s->opt.max_batch = 1;
    if (s->opt.writer_conns < 1)
        s->opt.writer_conns = 8;
    if (s->opt.pool_timeout_ms <= 0)
        s->opt.pool_timeout_ms = 5000;
    if (s->opt.idle_timeout_ms <= 0)
        s->opt.idle_timeout_ms = 60000;
    snprintf(s->url, sizeof s->url, "%s", opt->url);
    s->opt.url = s->url;
    if (opt->application_name)
        snprintf(s->application_name, sizeof s->application_name, "%s", opt->application_name);
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->pool_lock, NULL);
    pthread_cond_init(&s->has_work, NULL);
    pthread_key_create(&s->reader_key, NULL); /* readers are closed by store_close */

    if (db_is_postgres_url(s->url)) {
        s->kind = DB_POSTGRES;
        if (pg_start(s, err, errlen) != 0) {
            store_close(s);
            return NULL;
        }
        pg_start_writers(s);
        return s;
    }
    db_conn *first = db_open(s->url, false, err, errlen);
    if (!first) {
        store_close(s);
        return NULL;
    }
    s->kind = DB_SQLITE;
    /* the writer's cache stays as db.c sets it (see there why it is small) */
    if (db_sqlite_tune(first, 0, opt->sqlite_mmap_mb) != DB_DONE ||
        store_migrate(first, err, errlen) != 0 ||
        (opt->on_first_connect && opt->on_first_connect(first, opt->on_first_connect_arg) != 0)) {
        if (!err[0])
            snprintf(err, errlen, "start-up work on the database failed");
        db_close(first);
        store_close(s);
        return NULL;
    }
    s->writer_db = first;
    db_checkpoint_at(first, WAL_CHECKPOINT_PAGES, around_checkpoint, s);
    pthread_create(&s->writer, NULL, writer_main, s);
    pthread_setname_np(s->writer, "db-writer"); /* what `top -H` shows */
    s->writer_started = true;
    return s;
}

void store_close(store *s)
{
    if (!s)
        return;
    if (s->writer_started || s->pg_writer_count) {
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        pthread_cond_broadcast(&s->has_work);
        pthread_mutex_unlock(&s->lock);
        if (s->writer_started)
            pthread_join(s->writer, NULL);
        for (int i = 0; i < s->pg_writer_count; i++)
            pthread_join(s->pg_writers[i], NULL);
        free(s->pg_writers);
    }
    db_close(s->writer_db);
    pool_destroy(&s->writer_pool);
    pool_destroy(&s->reader_pool);
    for (int i = 0; i < s->reader_count; i++) {
        db_close(s->readers[i]->conn);
        free(s->readers[i]);
    }
    pthread_key_delete(s->reader_key);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->pool_lock);
    pthread_cond_destroy(&s->has_work);
    free(s);
}

/* ---- PostgreSQL: group commit ----
 *
 * Each write connection has a writer thread that takes every queued job (up to max_batch) and
 * runs them in one transaction, committing once: one WAL flush for the batch instead of one per
 * job. A batch first runs optimistically, its jobs back to back with no savepoint: nearly every
 * job succeeds, and a savepoint costs a round trip and a subtransaction (jobs of one batch that
 * update one row, such as an account's balance, would otherwise pile MultiXacts onto it). When
 * any job fails, the batch is rolled back and run again carefully, each job inside its own
 * SAVEPOINT, so a job that fails has only its savepoint rolled back.
 * A job that hits a deadlock or serialization failure is rolled back to its savepoint and run
 * again in a batch of its own after the commit (re-running it at once would wait on the locks
 * its own batch holds); a COMMIT that fails that way retries the whole batch.
 * Each job locks rows in an order of its own (a transfer locks its two accounts by id), but a
 * batch of several locks them in its jobs' order, so two batches can deadlock, and PostgreSQL
 * tells only after deadlock_timeout (1 s), with every job of both waiting. So in a transaction
 * of several jobs a row lock is waited for BATCH_LOCK_WAIT_MS at most, then the job counts as
 * a deadlock (the first attempts only: later ones wait as long as the session allows). Jobs are
 * pure functions of their context, so running one again is safe. A connection lost before COMMIT
 * was sent kept nothing: the batch runs again once on a fresh connection. One lost during
 * COMMIT leaves the outcome unknown: its jobs fail, and each caller's retry, keyed by its
 * Idempotency-Key, settles it. */

static void pg_pause(int attempt)
{
    /* step aside for a short, random while so two transactions do not collide in lockstep */
    uint8_t r;
    RAND_bytes(&r, 1);
    struct timespec pause = {0, (long)(1 + r % 4) * attempt * 1000000L};
    nanosleep(&pause, NULL);
}

typedef enum {
    BATCH_COMMITTED,
    BATCH_CAREFULLY, /* a job failed in an optimistic batch: rolled back, run it with savepoints */
    BATCH_BUSY,
    BATCH_LOST,
    BATCH_IN_DOUBT,
    BATCH_FAILED
} batch_end;

/* Runs one job (settle: and sends the writes it held back); a deadlock or serialization
 * failure it reported as a plain failure is still one (DB_BUSY): the job runs again. */
static int pg_run_job(db_conn *db, write_job *job, bool settle)
{
    db_clear_busy(db);
    db_failure before = db_thread_failure();
    db_thread_failure_reset();
    int result = run_job(db, job);
    if (settle && result == 0)
        result = db_flush(db);
    job->failure = db_thread_failure(); /* a lock or statement timeout, for its caller */
    db_note_failure(before);
    if (result != 0 && db_saw_busy(db))
        result = DB_BUSY;
    return result;
}

/* The end of an attempt: the held additions and COMMIT. A connection lost meanwhile leaves the
 * outcome unknown. */
static batch_end pg_commit(db_conn *db)
{
    db_status rc = commit(db);
    if (rc == DB_DONE)
        return BATCH_COMMITTED;
    if (db_broken(db))
        return BATCH_IN_DOUBT;
    db_exec(db, "ROLLBACK", "");
    return rc == DB_BUSY ? BATCH_BUSY : BATCH_FAILED;
}

/* One optimistic attempt: the jobs back to back in one transaction. A single job is the
 * transaction itself, and its failure is its answer; in a batch, any failure sends the whole
 * batch round again with savepoints. */
static batch_end pg_run_optimistic(db_conn *db, write_job **jobs, int n)
{
    held.count = 0;
    db_begin(db); /* sent with the first job's first statement */
    for (int i = 0; i < n; i++) {
        /* a held write that failed its check fails the job it ran in, or a later one (whose
         * careful rerun then tells which); the last job's are settled before COMMIT */
        int result = pg_run_job(db, jobs[i], i == n - 1);
        int deferred = db_take_deferred_failure(db);
        if (deferred) /* it came first: what failed after it follows from it */
            result = deferred;
        if (db_broken(db))
            return BATCH_LOST;
        /* a job that swallowed an error (a timeout it took for "no row") left the transaction
         * aborted: its COMMIT would roll back and still report success */
        bool swallowed = result == 0 && db_transaction_failed(db);
        jobs[i]->result = swallowed ? STORE_FAILED : result;
        if (result != 0 || swallowed) {
            db_exec(db, "ROLLBACK", "");
            if (n > 1)
                return BATCH_CAREFULLY;
            if (swallowed)
                return BATCH_FAILED;
            return result == DB_BUSY ? BATCH_BUSY : BATCH_COMMITTED; /* nothing to keep */
        }
    }
    return pg_commit(db);
}

/* Checked writes (db_exec_checked) are held back during an optimistic attempt, to travel with
 * the next statement that needs an answer: a fenced write costs no round trip of its own. */
static batch_end pg_try_optimistic(db_conn *db, write_job **jobs, int n)
{
    db_set_deferral(db, true);
    batch_end end = pg_run_optimistic(db, jobs, n);
    db_set_deferral(db, false);
    return end;
}

/* One careful attempt: each job inside its own savepoint. Sets each job's result; busy[i]
 * marks jobs to run again. */
static batch_end pg_try_carefully(db_conn *db, write_job **jobs, int n, bool *busy)
{
    /* savepoint boundaries share a round trip with the statement before them */
    held.count = 0;
    db_begin(db);
    if (db_exec_script(db, "SAVEPOINT job") != DB_DONE)
        return db_broken(db) ? BATCH_LOST : BATCH_FAILED;
    for (int i = 0; i < n; i++) {
        bool last = i == n - 1;
        busy[i] = false;
        int mark = held.count;
        int result = pg_run_job(db, jobs[i], false);
        if (db_broken(db))
            return BATCH_LOST;
        /* RELEASE fails when the job swallowed an error that aborted its savepoint: then
         * nothing it did can be kept */
        if (result != 0 ||
            db_exec_script(db, last ? "RELEASE job" : "RELEASE job; SAVEPOINT job") != DB_DONE) {
            if (db_exec_script(db, last ? "ROLLBACK TO job; RELEASE job"
                                        : "ROLLBACK TO job; RELEASE job; SAVEPOINT job") != DB_DONE)
                return db_broken(db) ? BATCH_LOST : BATCH_FAILED;
            if (result == 0) /* an error it swallowed: a deadlock is still one */
                result = db_saw_busy(db) ? DB_BUSY : STORE_FAILED;
            held.count = mark; /* what the job held goes with its writes */
        }
        jobs[i]->result = result;
        busy[i] = result == DB_BUSY;
    }
    return pg_commit(db);
}

static void count_retry(store *s, int64_t *counter)
{
    pthread_mutex_lock(&s->lock);
    (*counter)++;
    pthread_mutex_unlock(&s->lock);
}

static void pg_finish_jobs(store *s, write_job **jobs, int n, int batches)
{
    pthread_mutex_lock(&s->lock);
    s->stats.jobs += n;
    s->stats.batches += batches;
    s->stats.batch_size_buckets[batch_bucket(n)] += batches;
    pthread_mutex_unlock(&s->lock);
    settle_batch_failures(s, jobs, n);
    for (int i = 0; i < n; i++)
        job_finished(jobs[i]);
}

static void pg_run_batch(store *s, write_job **jobs, int n)
{
    /* jobs that waited longer than a request may wait for a connection are answered at once
     * (503 overloaded): the writers are behind, and they would only fall further behind */
    int64_t too_old = clock_ns() - s->opt.pool_timeout_ms * 1000000;
    int fresh = 0;
    for (int i = 0; i < n; i++) {
        if (jobs[i]->queued_ns < too_old) {
            jobs[i]->result = STORE_FAILED;
            jobs[i]->failure = DB_FAILURE_TIMEOUT;
            job_finished(jobs[i]);
        } else {
            jobs[fresh++] = jobs[i];
        }
    }
    n = fresh;
    if (n == 0)
        return;
    bool *busy = calloc((size_t)n, sizeof *busy);
    write_job **again = calloc((size_t)n, sizeof *again);
    int batches = 0;
    bool reconnected = false;
    bool carefully = false; /* after a job failed in an optimistic batch */
    int attempt = 0;
    for (int i = 0; i < n; i++) {
        jobs[i]->result = STORE_FAILED;
        jobs[i]->failure = DB_FAILURE_NONE;
    }
    write_job **todo = jobs;
    int count = n;
    while (count > 0) {
        db_thread_failure_reset();
        db_conn *db = pool_take(s, &s->writer_pool);
        if (!db) {
            for (int i = 0; i < count; i++) {
                todo[i]->result = STORE_FAILED;
                todo[i]->failure = db_thread_failure();
            }
            break;
        }
        for (int i = 0; i < count; i++)
            busy[i] = false;
        db_set_lock_wait(db, count > 1 && attempt < PG_ATTEMPTS / 2 ? BATCH_LOCK_WAIT_MS : 0);
        batch_end end = carefully && count > 1 ? pg_try_carefully(db, todo, count, busy)
                                               : pg_try_optimistic(db, todo, count);
        db_failure failure = db_thread_failure();
        if (end == BATCH_FAILED || end == BATCH_IN_DOUBT || end == BATCH_LOST)
            for (int i = 0; i < count; i++)
                snprintf(todo[i]->error, sizeof todo[i]->error, "%s", db_last_error(db));
        if (end == BATCH_FAILED || end == BATCH_IN_DOUBT)
            log_error("error", "write batch failed", db_last_error(db));
        pool_give(s, &s->writer_pool, db);
        batches++;
        if (end == BATCH_CAREFULLY) {
            carefully = true; /* nothing was kept */
            count_retry(s, &s->stats.careful_reruns);
            continue;
        }
        if (end == BATCH_LOST && !reconnected) {
            reconnected = true; /* nothing was kept: once more on a fresh connection */
            continue;
        }
        if (end == BATCH_BUSY && ++attempt < PG_ATTEMPTS) {
            count_retry(s, &s->stats.busy_retries);
            pg_pause(attempt);
            continue;
        }
        if (end != BATCH_COMMITTED) {
            pthread_mutex_lock(&s->lock);
            s->stats.failed_commits++;
            pthread_mutex_unlock(&s->lock);
            for (int i = 0; i < count; i++) {
                if (end != BATCH_BUSY)
                    todo[i]->result = STORE_FAILED;
                db_failure f = failure != DB_FAILURE_NONE                   ? failure
                               : end == BATCH_LOST || end == BATCH_IN_DOUBT ? DB_FAILURE_UNAVAILABLE
                                                                            : DB_FAILURE_NONE;
                if (f > todo[i]->failure)
                    todo[i]->failure = f;
            }
            break;
        }
        /* committed: the jobs that met a deadlock run again, on their own */
        int next = 0;
        for (int i = 0; i < count; i++)
            if (busy[i] && count > 1)
                again[next++] = todo[i];
        if (next == 0 || ++attempt >= PG_ATTEMPTS)
            break;
        count_retry(s, &s->stats.busy_retries);
        pg_pause(attempt);
        todo = again; /* may already be again itself: next never overtakes i above */
        count = next;
    }
    free(busy);
    free(again);
    pg_finish_jobs(s, jobs, n, batches);
}

static void pg_start_writers(store *s)
{
    s->pg_writer_count = s->writer_pool.max;
    s->pg_writers = calloc((size_t)s->pg_writer_count, sizeof *s->pg_writers);
    for (int i = 0; i < s->pg_writer_count; i++) {
        pthread_create(&s->pg_writers[i], NULL, writer_main, s);
        pthread_setname_np(s->pg_writers[i], "db-writer");
    }
}

static void enqueue(store *s, write_job *job)
{
    if (s->kind == DB_POSTGRES)
        job->queued_ns = clock_ns();
    pthread_mutex_lock(&s->lock);
    if (s->tail)
        s->tail->next = job;
    else
        s->head = job;
    s->tail = job;
    s->depth++;
    pthread_cond_signal(&s->has_work);
    pthread_mutex_unlock(&s->lock);
}

int store_write(store *s, write_job_fn fn, void *ctx)
{
    /* PostgreSQL: a reader this thread holds goes back to the pool while it waits, so waiting
     * writers do not hold the read budget (the handler asks store_reader again afterwards) */
    store_thread_done(s);
    write_job job = {.fn = fn, .ctx = ctx, .done = thread_semaphore()};
    enqueue(s, &job);
    while (sem_wait(job.done) != 0) {
    }
    if (job.result == STORE_FAILED) /* here, on the caller's thread, the request is known */
        log_error("error", "write job failed", job.error);
    db_note_failure(job.failure);
    return job.result;
}

static void submit(store *s, write_job_fn fn, void *ctx, write_done_fn then, void *then_arg,
                   bool unsynced)
{
    write_job *job = calloc(1, sizeof *job);
    job->fn = fn;
    job->ctx = ctx;
    job->then = then;
    job->then_arg = then_arg;
    job->unsynced = unsynced;
    enqueue(s, job);
}

void store_submit(store *s, write_job_fn fn, void *ctx, write_done_fn then, void *then_arg)
{
    submit(s, fn, ctx, then, then_arg, false);
}

void store_submit_unsynced(store *s, write_job_fn fn, void *ctx, write_done_fn then, void *then_arg)
{
    submit(s, fn, ctx, then, then_arg, true);
}

write_result write_result_of(int job_rc)
{
    switch (job_rc) {
    case 0:
        return WRITE_OK;
    case WRITE_REFUSED:
    case WRITE_FENCED:
    case WRITE_CONFLICT:
    case WRITE_RETRY:
    case WRITE_FAILED:
        return (write_result)job_rc;
    case DB_CONSTRAINT:
        return WRITE_CONFLICT;
    case DB_BUSY:
        return WRITE_RETRY;
    default: /* DB_ERROR, STORE_FAILED, anything unknown: assume the worst */
        return WRITE_FAILED;
    }
}

const char *write_result_name(write_result r)
{
    static const char *const names[] = {"ok", "refused", "fenced", "conflict", "retry", "failed"};
    return r >= WRITE_OK && r <= WRITE_FAILED ? names[r] : "failed";
}

write_result store_run(store *s, write_job_fn fn, void *ctx)
{
    return write_result_of(store_write(s, fn, ctx));
}

write_result store_run_upkeep(store *s, write_job_fn fn, void *ctx)
{
    if (s->kind != DB_POSTGRES)
        return store_run(s, fn, ctx);
    /* a reader connection: readers are lent for a request's reads only, so one is free soon */
    db_conn *db = pool_take(s, &s->reader_pool);
    if (!db) {
        log_error("error", "upkeep write failed", "no database connection");
        return WRITE_FAILED;
    }
    int rc = db_begin(db);
    if (rc == DB_DONE)
        rc = fn(db, ctx);
    /* a job that took an error for "no row" left the transaction aborted: nothing to keep */
    if (rc == 0 && db_transaction_failed(db))
        rc = STORE_FAILED;
    if (rc == 0)
        rc = db_exec(db, "COMMIT", "") == DB_DONE ? 0 : STORE_FAILED;
    else
        db_exec(db, "ROLLBACK", "");
    if (rc != 0)
        log_error("error", "upkeep write failed", db_last_error(db));
    pool_give(s, &s->reader_pool, db);
    return write_result_of(rc);
}

int64_t store_queue_depth(store *s)
{
    pthread_mutex_lock(&s->lock);
    int64_t d = s->depth;
    pthread_mutex_unlock(&s->lock);
    return d;
}

void store_get_stats(store *s, store_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->stats;
    out->queue_depth = s->depth;
    pthread_mutex_unlock(&s->lock);
    out->checkpoints = atomic_load(&s->checkpoint_edges) / 2; /* each is begun, then finished */
}

/* ---- readers ----
 *
 * SQLite: one connection per thread. A request's reads share one read snapshot, which is kept
 * ("parked") when the request ends: the next request on the thread reads from it without
 * taking SQLite's per-transaction locks for as long as the WAL-index header shows that nothing
 * has committed since it began (db_snapshot_enter); reads outside a request run one statement at
 * a time, as before. A parked snapshot pins the WAL frames it reads, which a checkpoint could
 * otherwise copy back and a later write start over, so the writer ends every parked snapshot
 * before it checkpoints, and again after: one begun during the checkpoint pins the frames that
 * came after what it copied. A snapshot in use while a checkpoint began or ended is not parked
 * but ended when its request is done: parked, it would keep the WAL from starting over at the
 * next write (SQLite starts it over only when no reader uses a snapshot older than the
 * checkpoint), and the writer would checkpoint again at its next commit, for the few pages
 * written since and a full fdatasync of the database. A slot's state says which thread may use
 * its connection. */
/* Set between store_request_begin and store_thread_done on a thread serving a request. */
static _Thread_local bool reads_for_request;

void store_request_begin(store *s)
{
    (void)s;
    reads_for_request = true;
}

/* On the owner's thread. */
static void slot_take(reader_slot *r)
{
    for (;;) {
        int seen = atomic_load(&r->state);
        if (seen == READER_IN_USE)
            return; /* already taken by this thread */
        if (seen != READER_ENDING && atomic_compare_exchange_weak(&r->state, &seen, READER_IN_USE))
            return;
        sched_yield(); /* the writer is ending the parked snapshot (one COMMIT) */
    }
}

static void slot_put(store *s, reader_slot *r)
{
    if (db_snapshot_open(r->conn) && atomic_load(&s->checkpoint_edges) != r->checkpoint_edges)
        db_snapshot_end(r->conn);
    atomic_store(&r->state, db_snapshot_open(r->conn) ? READER_PARKED : READER_FREE);
}

/* On the writer's thread, before and after a checkpoint. */
static void around_checkpoint(void *arg)
{
    store *s = arg;
    atomic_fetch_add(&s->checkpoint_edges, 1);
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->reader_count; i++) {
        reader_slot *r = s->readers[i];
        int parked = READER_PARKED;
        if (atomic_compare_exchange_strong(&r->state, &parked, READER_ENDING)) {
            db_snapshot_end(r->conn);
            atomic_store(&r->state, READER_FREE);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

static db_conn *lite_reader(store *s)
{
    reader_slot *r = pthread_getspecific(s->reader_key);
    if (!r) {
        char err[256];
        db_conn *c = db_open(s->url, true, err, sizeof err);
        if (c && db_sqlite_tune(c, s->opt.sqlite_cache_mb ? s->opt.sqlite_cache_mb : 16,
                                s->opt.sqlite_mmap_mb) != DB_DONE) {
            snprintf(err, sizeof err, "%s", db_last_error(c));
            db_close(c);
            c = NULL;
        }
        if (!c) {
            log_error("error", "cannot open reader", err);
            return NULL;
        }
        r = calloc(1, sizeof *r);
        r->conn = c;
        atomic_init(&r->state, READER_IN_USE);
        pthread_mutex_lock(&s->lock);
        if (s->reader_count == MAX_READERS) {
            pthread_mutex_unlock(&s->lock);
            db_close(c);
            free(r);
            return NULL;
        }
        s->readers[s->reader_count++] = r;
        pthread_mutex_unlock(&s->lock);
        pthread_setspecific(s->reader_key, r);
    }
    slot_take(r);
    r->checkpoint_edges = atomic_load(&s->checkpoint_edges);
    if (reads_for_request)
        db_snapshot_enter(r->conn);
    else
        db_snapshot_end(r->conn);
    return r->conn;
}

bool store_keeps_snapshot(store *s)
{
    reader_slot *r = s->kind == DB_SQLITE ? pthread_getspecific(s->reader_key) : NULL;
    return r && db_snapshot_open(r->conn);
}

db_conn *store_reader(store *s)
{
    if (s->kind != DB_POSTGRES)
        return lite_reader(s);
    db_conn *c = pthread_getspecific(s->reader_key);
    if (c)
        return c;
    c = pool_take(s, &s->reader_pool);
    if (c)
        pthread_setspecific(s->reader_key, c);
    return c;
}

void store_thread_done(store *s)
{
    reads_for_request = false;
    if (s->kind != DB_POSTGRES) {
        /* the connection stays with its thread: opening one costs more than a read */
        reader_slot *r = pthread_getspecific(s->reader_key);
        if (r)
            slot_put(s, r);
        return;
    }
    db_conn *c = pthread_getspecific(s->reader_key);
    if (!c)
        return;
    pthread_setspecific(s->reader_key, NULL);
    pool_give(s, &s->reader_pool, c);
}

void store_release_reader(store *s)
{
    if (s->kind == DB_POSTGRES) {
        store_thread_done(s);
        return;
    }
    reader_slot *r = pthread_getspecific(s->reader_key);
    if (!r)
        return;
    pthread_setspecific(s->reader_key, NULL);
    pthread_mutex_lock(&s->lock); /* the writer sweeps the slots under it */
    for (int i = 0; i < s->reader_count; i++)
        if (s->readers[i] == r) {
            s->readers[i] = s->readers[--s->reader_count];
            break;
        }
    pthread_mutex_unlock(&s->lock);
    db_close(r->conn);
    free(r);
}

typedef struct secret_job {
    const char *name;
    char hex[65];
} secret_job;

static int load_or_create_secret(db_conn *db, void *arg)
{
    secret_job *job = arg;
    uint8_t fresh[32];
    char hex[65];
    RAND_bytes(fresh, sizeof fresh);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", fresh[i]);
    if (db_exec(db, "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                "ss", job->name, hex) != DB_DONE)
        return -1;
    db_stmt *st = db_query(db, "SELECT value FROM secrets WHERE name = $1", "s", job->name);
    int rc = -1;
    if (db_step(st) == DB_ROW && db_text(st, 0) && strlen(db_text(st, 0)) == 64) {
        memcpy(job->hex, db_text(st, 0), 65);
        rc = 0;
    }
    db_done(st);
    return rc;
}

static void secret_from_hex(const secret_job *job, uint8_t out[32])
{
    for (int i = 0; i < 32; i++) {
        unsigned v;
        sscanf(job->hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
}

int store_secret(store *s, const char *name, uint8_t out[32])
{
    secret_job job = {.name = name};
    if (store_write(s, load_or_create_secret, &job) != 0)
        return -1;
    secret_from_hex(&job, out);
    return 0;
}

int store_secret_on(db_conn *db, const char *name, uint8_t out[32])
{
    secret_job job = {.name = name};
    if (db_exec(db, "BEGIN", "") != DB_DONE)
        return -1;
    if (load_or_create_secret(db, &job) != 0 || db_exec(db, "COMMIT", "") != DB_DONE) {
        db_exec(db, "ROLLBACK", "");
        return -1;
    }
    secret_from_hex(&job, out);
    return 0;
}

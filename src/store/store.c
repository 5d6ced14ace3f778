/* The store: one queue of write jobs, run in batches by the writer (SQLite: one thread;
 * PostgreSQL: one per write connection, pg_group_commit.c), and the calls to submit them.
 * PostgreSQL's pools are in pg_pool.c, the readers in readers.c. */
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
#include "store/store_internal.h"

int64_t store_clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A job's batch has ended: its caller wakes, or (store_submit) its continuation runs here, on
 * the writer's thread, and the job is freed. */
void store_job_finished(write_job *job)
{
    if (!job->then) {
        sem_post(job->done);
        return;
    }
    job->then(job->result, job->failure, job->store_failed ? job->error : NULL, job->then_arg);
    free(job);
}

/* ---- additions held until the batch commits (store_add_at_commit) ---- */

typedef struct held_adds {
    bool active; /* this thread is running a batch */
    store_add *items;
    int count, cap;
} held_adds;
static _Thread_local held_adds held;

int store_held_adds_mark(void)
{
    return held.count;
}

void store_held_adds_rewind(int mark)
{
    held.count = mark;
}

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
    store_held_adds_rewind(0);
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

static store_faults faults;

void store_set_faults(const store_faults *f)
{
    faults = f ? *f : (store_faults){0};
}

/* Runs a job's function. A job may run more than once (a batch run again with savepoints); an
 * injected failure is the job's, so every run of it meets the same one. The database failure
 * its last run met (SQLite: a full disk, an I/O error) is kept for its caller's answer. */
write_result store_run_job(db_conn *db, write_job *job)
{
    job->store_failed = false; /* this run's end is the job's own */
    if (job->fault == FAULT_UNASKED)
        job->fault = faults.fail_job && faults.fail_job() ? FAULT_FAIL : FAULT_NONE;
    if (job->fault == FAULT_FAIL)
        return WRITE_FAILED;
    db_failure before = db_thread_failure();
    db_thread_failure_reset();
    write_result rc = job->fn(db, job->ctx);
    job->failure = db_thread_failure();
    db_note_failure(before);
    return rc;
}

void store_fail_job(write_job *job)
{
    job->result = WRITE_FAILED;
    job->store_failed = true;
}

write_result store_result_of_code(int code)
{
    switch (code) {
    case WRITE_REFUSED:
    case WRITE_FENCED:
    case WRITE_CONFLICT:
    case WRITE_RETRY:
    case WRITE_FAILED:
        return (write_result)code;
    default:
        return write_result_of_db((db_status)code);
    }
}

/* After a batch: each job's caller learns the failure to answer with, and the store whether the
 * database writes (store/write_health.h). */
void store_settle_batch_failures(store *s, write_job **jobs, int n)
{
    bool kept = false, failing = false;
    for (int i = 0; i < n; i++) {
        kept |= jobs[i]->result == WRITE_OK;
        failing |=
            write_failed_for_database(jobs[i]->result, jobs[i]->store_failed, jobs[i]->failure);
        jobs[i]->failure = write_failure_for_caller(jobs[i]->result, jobs[i]->failure);
    }
    write_health_note(&s->health, kept, failing);
}

bool store_writes_failing(store *s)
{
    return write_health_failing(&s->health);
}

db_status store_commit(db_conn *db)
{
    if (faults.at_commit)
        faults.at_commit(false);
    db_status rc = commit_with_held_adds(db);
    if (faults.at_commit && rc == DB_DONE)
        faults.at_commit(true);
    return rc;
}

int store_batch_bucket(int n)
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
        jobs[i]->result = store_run_job(db, jobs[i]);
        if (jobs[i]->result != WRITE_OK) {
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
        int mark = store_held_adds_mark();
        jobs[i]->result = store_run_job(db, jobs[i]);
        if (jobs[i]->result != WRITE_OK) {
            store_held_adds_rewind(mark); /* what the job held goes with its writes */
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
    store_held_adds_rewind(0);
    /* a failure to set how this commit syncs fails the batch: a synced batch must never
     * commit unsynced */
    bool ok = db_sync_commits(db, synced) == DB_DONE && db_begin(db) == DB_DONE;
    bool clean = false;
    if (ok && n == 1) {
        jobs[0]->result = store_run_job(db, jobs[0]);
        if (jobs[0]->result != WRITE_OK) {
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
        store_held_adds_rewind(0);
        ok = db_begin(db) == DB_DONE;
        if (ok)
            run_with_savepoints(db, jobs, n);
    }
    if (!ok || store_commit(db) != DB_DONE) {
        log_error("error", "batch commit failed", db_last_error(db));
        for (int i = 0; i < n; i++) {
            store_fail_job(jobs[i]);
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
    s->stats.batch_size_buckets[store_batch_bucket(n)]++;
    pthread_mutex_unlock(&s->lock);
    store_settle_batch_failures(s, jobs, n);
    for (int i = 0; i < n; i++)
        store_job_finished(jobs[i]);
}

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

/* A write_probe's end: write_health_note has taken what it says. */
static void probe_written(write_result result, db_failure failure, const char *error, void *arg)
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
        *probe =
            (write_job){.fn = write_probe, .then = probe_written, .queued_ns = store_clock_ns()};
        s->head = s->tail = probe;
        s->depth++;
    }
}

void *store_writer_main(void *arg)
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
            store_pg_run_batch(s, batch, n);
        else
            lite_run_batch(s, batch, n);
    }
    free(batch);
    free(held.items);
    return NULL;
}

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
        if (store_pg_start(s, err, errlen) != 0) {
            store_close(s);
            return NULL;
        }
        store_pg_start_writers(s);
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
    db_checkpoint_at(first, WAL_CHECKPOINT_PAGES, store_around_checkpoint, s);
    pthread_create(&s->writer, NULL, store_writer_main, s);
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
    pg_pool_destroy(&s->writer_pool);
    pg_pool_destroy(&s->reader_pool);
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

static void enqueue(store *s, write_job *job)
{
    if (s->kind == DB_POSTGRES)
        job->queued_ns = store_clock_ns();
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

write_result store_write(store *s, write_job_fn fn, void *ctx)
{
    /* PostgreSQL: a reader this thread holds goes back to the pool while it waits, so waiting
     * writers do not hold the read budget (the handler asks store_reader again afterwards) */
    store_thread_done(s);
    write_job job = {.fn = fn, .ctx = ctx, .done = thread_semaphore()};
    enqueue(s, &job);
    while (sem_wait(job.done) != 0) {
    }
    if (job.store_failed) /* here, on the caller's thread, the request is known */
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

write_result write_result_of_db(db_status rc)
{
    switch (rc) {
    case DB_DONE:
    case DB_ROW:
        return WRITE_OK;
    case DB_CONSTRAINT:
        return WRITE_CONFLICT;
    case DB_BUSY:
        return WRITE_RETRY;
    default: /* DB_ERROR, DB_UNAVAILABLE, DB_TIMEOUT, anything unknown: assume the worst */
        return WRITE_FAILED;
    }
}

const char *write_result_name(write_result r)
{
    static const char *const names[] = {"ok", "refused", "fenced", "conflict", "retry", "failed"};
    return r >= WRITE_OK && r <= WRITE_FAILED ? names[r] : "failed";
}

write_result store_run_upkeep(store *s, write_job_fn fn, void *ctx)
{
    if (s->kind != DB_POSTGRES)
        return store_write(s, fn, ctx);
    /* a reader connection: readers are lent for a request's reads only, so one is free soon */
    db_conn *db = pg_pool_take(s, &s->reader_pool);
    if (!db) {
        log_error("error", "upkeep write failed", "no database connection");
        return WRITE_FAILED;
    }
    write_result rc = write_result_of_db(db_begin(db));
    if (rc == WRITE_OK)
        rc = fn(db, ctx);
    /* a job that took an error for "no row" left the transaction aborted: nothing to keep */
    if (rc == WRITE_OK && db_transaction_failed(db))
        rc = WRITE_FAILED;
    if (rc == WRITE_OK)
        rc = db_exec(db, "COMMIT", "") == DB_DONE ? WRITE_OK : WRITE_FAILED;
    else
        db_exec(db, "ROLLBACK", "");
    if (rc != WRITE_OK)
        log_error("error", "upkeep write failed", db_last_error(db));
    pg_pool_give(s, &s->reader_pool, db);
    return rc;
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

typedef struct secret_job {
    const char *name;
    char hex[65];
} secret_job;

static write_result load_or_create_secret(db_conn *db, void *arg)
{
    secret_job *job = arg;
    uint8_t fresh[32];
    char hex[65];
    RAND_bytes(fresh, sizeof fresh);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", fresh[i]);
    if (db_exec(db, "INSERT INTO secrets (name, value) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                "ss", job->name, hex) != DB_DONE)
        return WRITE_FAILED;
    db_stmt *st = db_query(db, "SELECT value FROM secrets WHERE name = $1", "s", job->name);
    write_result rc = WRITE_FAILED;
    if (db_step(st) == DB_ROW && db_text(st, 0) && strlen(db_text(st, 0)) == 64) {
        memcpy(job->hex, db_text(st, 0), 65);
        rc = WRITE_OK;
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
    if (store_write(s, load_or_create_secret, &job) != WRITE_OK)
        return -1;
    secret_from_hex(&job, out);
    return 0;
}

int store_secret_on(db_conn *db, const char *name, uint8_t out[32])
{
    secret_job job = {.name = name};
    if (db_exec(db, "BEGIN", "") != DB_DONE)
        return -1;
    if (load_or_create_secret(db, &job) != WRITE_OK || db_exec(db, "COMMIT", "") != DB_DONE) {
        db_exec(db, "ROLLBACK", "");
        return -1;
    }
    secret_from_hex(&job, out);
    return 0;
}

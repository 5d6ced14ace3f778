#include "store/store.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"

typedef struct write_job {
    write_job_fn fn;
    void *ctx;
    int result;
    char error[200]; /* the database's reason when result is STORE_FAILED */
    sem_t *done;
    struct write_job *next;
} write_job;

#define MAX_READERS 1024
#define PG_ATTEMPTS 10

/* On a request's thread the line carries its request id (core/log.h). */
static void log_store_failure(const char *msg, const char *error)
{
    jsonw w;
    log_begin(&w, "error", msg);
    jw_key(&w, "error");
    jw_string(&w, error);
    log_end(&w);
}

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
    db_conn *writer_db;

    /* PostgreSQL: a pool of write connections, one transaction per job */
    db_conn **pool;
    int pool_free;
    pthread_cond_t pool_has_free;

    /* readers, one per thread */
    pthread_key_t reader_key;
    db_conn *readers[MAX_READERS];
    int reader_count;

    store_stats stats;
};

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

/* Runs one job, unless a fault says this one fails as a database error would. */
static int run_job(db_conn *db, write_job_fn fn, void *ctx)
{
    if (faults.fail_job && faults.fail_job())
        return DB_ERROR;
    return fn(db, ctx);
}

static db_status commit(db_conn *db)
{
    if (faults.at_commit)
        faults.at_commit(false);
    db_status rc = db_exec(db, "COMMIT", "");
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

/* One batch: BEGIN, each job in its savepoint, COMMIT. With max_batch 1 there is no savepoint:
 * the job is the transaction. */
static void run_batch(store *s, write_job **jobs, int n)
{
    db_conn *db = s->writer_db;
    bool ok = db_exec(db, "BEGIN IMMEDIATE", "") == DB_DONE;
    for (int i = 0; i < n && ok; i++) {
        if (n > 1)
            db_exec(db, "SAVEPOINT job", "");
        jobs[i]->result = run_job(db, jobs[i]->fn, jobs[i]->ctx);
        if (n > 1) {
            if (jobs[i]->result != 0)
                db_exec(db, "ROLLBACK TO job", "");
            db_exec(db, "RELEASE job", "");
        } else if (jobs[i]->result != 0) {
            db_exec(db, "ROLLBACK", "");
            goto finished;
        }
    }
    if (!ok || commit(db) != DB_DONE) {
        log_store_failure("batch commit failed", db_last_error(db));
        for (int i = 0; i < n; i++) {
            jobs[i]->result = STORE_FAILED;
            snprintf(jobs[i]->error, sizeof jobs[i]->error, "%s", db_last_error(db));
        }
        db_exec(db, "ROLLBACK", "");
        s->stats.failed_commits++;
    }
finished:
    pthread_mutex_lock(&s->lock);
    s->stats.jobs += n;
    s->stats.batches++;
    s->stats.batch_size_buckets[batch_bucket(n)]++;
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < n; i++)
        sem_post(jobs[i]->done);
}

static void *writer_main(void *arg)
{
    store *s = arg;
    write_job **batch = calloc((size_t)s->opt.max_batch, sizeof *batch);
    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (!s->head && !s->stopping)
            pthread_cond_wait(&s->has_work, &s->lock);
        if (!s->head && s->stopping) {
            pthread_mutex_unlock(&s->lock);
            break;
        }
        int n = 0;
        while (s->head && n < s->opt.max_batch) {
            batch[n++] = s->head;
            s->head = s->head->next;
        }
        if (!s->head)
            s->tail = NULL;
        s->depth -= n;
        pthread_mutex_unlock(&s->lock);
        run_batch(s, batch, n);
    }
    free(batch);
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
    snprintf(s->url, sizeof s->url, "%s", opt->url);
    s->opt.url = s->url;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->has_work, NULL);
    pthread_cond_init(&s->pool_has_free, NULL);
    pthread_key_create(&s->reader_key, NULL); /* readers are closed by store_close */

    db_conn *first = db_open(s->url, false, err, errlen);
    if (!first) {
        store_close(s);
        return NULL;
    }
    s->kind = db_kind_of(first);
    if (store_migrate(first, err, errlen) != 0) {
        db_close(first);
        store_close(s);
        return NULL;
    }
    if (s->kind == DB_SQLITE) {
        s->writer_db = first;
        pthread_create(&s->writer, NULL, writer_main, s);
        s->writer_started = true;
    } else {
        s->pool = calloc((size_t)s->opt.writer_conns, sizeof *s->pool);
        s->pool[s->pool_free++] = first;
        while (s->pool_free < s->opt.writer_conns) {
            db_conn *c = db_open(s->url, false, err, errlen);
            if (!c) {
                store_close(s);
                return NULL;
            }
            s->pool[s->pool_free++] = c;
        }
    }
    return s;
}

void store_close(store *s)
{
    if (!s)
        return;
    if (s->writer_started) {
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        pthread_cond_signal(&s->has_work);
        pthread_mutex_unlock(&s->lock);
        pthread_join(s->writer, NULL);
    }
    db_close(s->writer_db);
    for (int i = 0; i < s->pool_free; i++)
        db_close(s->pool[i]);
    free(s->pool);
    for (int i = 0; i < s->reader_count; i++)
        db_close(s->readers[i]);
    pthread_key_delete(s->reader_key);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->has_work);
    pthread_cond_destroy(&s->pool_has_free);
    free(s);
}

/* PostgreSQL: the job is one transaction on a pooled connection; serialization failures and
 * deadlocks are retried, since the job is a pure function of its context. */
static int pg_write(store *s, write_job_fn fn, void *ctx)
{
    pthread_mutex_lock(&s->lock);
    s->depth++;
    while (s->pool_free == 0)
        pthread_cond_wait(&s->pool_has_free, &s->lock);
    db_conn *db = s->pool[--s->pool_free];
    s->depth--;
    pthread_mutex_unlock(&s->lock);

    int result = STORE_FAILED;
    for (int attempt = 0; attempt < PG_ATTEMPTS; attempt++) {
        if (attempt > 0) {
            /* a deadlock or serialization failure: the other transaction went on; step aside
             * for a short, random while so the two do not collide again in lockstep */
            uint8_t r;
            RAND_bytes(&r, 1);
            struct timespec pause = {0, (long)(1 + r % 4) * attempt * 1000000L};
            nanosleep(&pause, NULL);
        }
        if (db_exec(db, "BEGIN", "") != DB_DONE)
            break;
        result = run_job(db, fn, ctx);
        if (result == 0) {
            db_status rc = commit(db);
            if (rc == DB_DONE)
                break;
            result = rc == DB_BUSY ? DB_BUSY : STORE_FAILED;
        } else {
            db_exec(db, "ROLLBACK", "");
        }
        if (result != DB_BUSY)
            break;
    }

    if (result == STORE_FAILED)
        log_store_failure("write job failed", db_last_error(db));
    pthread_mutex_lock(&s->lock);
    s->pool[s->pool_free++] = db;
    s->stats.jobs++;
    s->stats.batches++;
    s->stats.batch_size_buckets[0]++;
    pthread_cond_signal(&s->pool_has_free);
    pthread_mutex_unlock(&s->lock);
    return result;
}

int store_write(store *s, write_job_fn fn, void *ctx)
{
    if (s->kind == DB_POSTGRES)
        return pg_write(s, fn, ctx);
    write_job job = {.fn = fn, .ctx = ctx, .done = thread_semaphore()};
    pthread_mutex_lock(&s->lock);
    if (s->tail)
        s->tail->next = &job;
    else
        s->head = &job;
    s->tail = &job;
    s->depth++;
    pthread_cond_signal(&s->has_work);
    pthread_mutex_unlock(&s->lock);
    while (sem_wait(job.done) != 0) {
    }
    if (job.result == STORE_FAILED) /* here, on the caller's thread, the request is known */
        log_store_failure("write job failed", job.error);
    return job.result;
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
}

db_conn *store_reader(store *s)
{
    db_conn *c = pthread_getspecific(s->reader_key);
    if (c)
        return c;
    char err[256];
    c = db_open(s->url, s->kind == DB_SQLITE, err, sizeof err);
    if (!c) {
        log_store_failure("cannot open reader", err);
        return NULL;
    }
    pthread_mutex_lock(&s->lock);
    if (s->reader_count == MAX_READERS) {
        pthread_mutex_unlock(&s->lock);
        db_close(c);
        return NULL;
    }
    s->readers[s->reader_count++] = c;
    pthread_mutex_unlock(&s->lock);
    pthread_setspecific(s->reader_key, c);
    return c;
}

void store_release_reader(store *s)
{
    db_conn *c = pthread_getspecific(s->reader_key);
    if (!c)
        return;
    pthread_setspecific(s->reader_key, NULL);
    pthread_mutex_lock(&s->lock);
    for (int i = 0; i < s->reader_count; i++)
        if (s->readers[i] == c) {
            s->readers[i] = s->readers[--s->reader_count];
            break;
        }
    pthread_mutex_unlock(&s->lock);
    db_close(c);
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

int store_secret(store *s, const char *name, uint8_t out[32])
{
    secret_job job = {.name = name};
    if (store_write(s, load_or_create_secret, &job) != 0)
        return -1;
    for (int i = 0; i < 32; i++) {
        unsigned v;
        sscanf(job.hex + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return 0;
}

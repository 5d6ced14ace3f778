#ifndef PAYD_STORE_STORE_INTERNAL_H
#define PAYD_STORE_STORE_INTERNAL_H
/* What the store's parts share: its job queue and writer (store.c), PostgreSQL's connection
 * pools and reconnection (pg_pool.c) and group commit (pg_group_commit.c), and the readers
 * (readers.c). Nothing outside these files includes it. */
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "store/store.h"
#include "store/write_health.h"

typedef struct write_job {
    write_job_fn fn;
    void *ctx;
    write_result result;
    /* the store failed it (its commit failed, no connection came, it waited too long, or it
     * swallowed an error): result is WRITE_FAILED and error the database's reason */
    bool store_failed;
    char error[200];
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

/* store.c */
int64_t store_clock_ns(void);
/* A job's batch has ended: its caller wakes, or (store_submit) its continuation runs on the
 * writer's thread, and the job is freed. */
void store_job_finished(write_job *job);
/* Runs a job's function, with its injected failure (store_set_faults) if any. */
write_result store_run_job(db_conn *db, write_job *job);
/* The store failed the job: nothing of it was kept (see write_job.store_failed). */
void store_fail_job(write_job *job);
/* A checked write's fail code (db_exec_checked, db_take_deferred_failure) as a job's result: a
 * db_status, or a write_result a job gave as the code (idem's WRITE_FENCED). */
write_result store_result_of_code(int code);
/* After a batch: each job's caller learns the failure to answer with (store/write_health.h). */
void store_settle_batch_failures(store *s, write_job **jobs, int n);
/* This thread's held additions (store_add_at_commit): how many are held, and forgetting those
 * made after a mark (a job rolled back to its savepoint; 0: a batch begins again). */
int store_held_adds_mark(void);
void store_held_adds_rewind(int mark);
/* COMMIT with the batch's held additions, and the commit fault points. */
db_status store_commit(db_conn *db);
/* The smallest b with n <= 2^b (store_stats' batch-size buckets). */
int store_batch_bucket(int n);
/* A writer thread: takes queued jobs and runs them in batches until the store closes. */
void *store_writer_main(void *arg);

/* pg_pool.c */
int store_pg_start(store *s, char *err, size_t errlen);
/* A connection from pool p, or NULL with the reason noted on the thread (db_thread_failure):
 * the database is down, or none was free within --db-pool-timeout. */
db_conn *pg_pool_take(store *s, pg_pool *p);
/* Back to the pool; a broken connection is closed and the database marked lost. */
void pg_pool_give(store *s, pg_pool *p, db_conn *c);
void pg_pool_destroy(pg_pool *p);

/* pg_group_commit.c */
void store_pg_run_batch(store *s, write_job **jobs, int n);
void store_pg_start_writers(store *s);

/* readers.c */
/* On the writer's thread, before and after an SQLite checkpoint: parked snapshots end. */
void store_around_checkpoint(void *arg);

#endif

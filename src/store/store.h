#ifndef PAYD_STORE_STORE_H
#define PAYD_STORE_STORE_H
/* The store: one writer that group-commits, and per-thread readers.
 *
 * Every write is a job: a function run against a writer connection. A writer takes all queued
 * jobs, runs them in one transaction and commits once (one fsync for the whole batch), then
 * wakes every job's caller. A job that returns anything but WRITE_OK has only its own writes
 * undone. On SQLite there is one writer thread; on PostgreSQL one per write connection (see
 * pg_group_commit.c for how a batch runs there).
 *
 * PostgreSQL connections come from two pools (writers, readers) under one budget
 * (max_connections). A lost connection marks the store down: requests fail fast (the thread's
 * db_thread_failure() says why) while one caller at a time tries to reconnect with backoff; the
 * first connection that works brings it back up. A store may be opened while PostgreSQL is
 * down (wait_for_database): the schema is migrated and on_first_connect runs when it first
 * answers. */
#include <stdbool.h>
#include <stdint.h>

#include "store/db.h"

typedef struct store store;

/* What a write job came to: what the job returns, and what its caller sees. Inside a job the
 * query layer speaks db_status (a step's result, like SQLite's rc); the job turns a status it met
 * into its answer with write_result_of_db, the one mapping, so no caller has to guess whether a
 * bare -1 was a constraint or a lost connection. */
typedef enum write_result {
    WRITE_OK = 0,       /* committed */
    WRITE_REFUSED = 1,  /* the job set a refusal as the answer and undid its own writes */
    WRITE_FENCED = 2,   /* the idempotency key belongs to a newer holder: nothing was kept */
    WRITE_CONFLICT = 3, /* a unique (or check) constraint refused a row: nothing was kept */
    /* From a job: it met a lock or serialization failure (or saw its rows move under it), so
     * the store runs it again (PostgreSQL; SQLite's one writer hands it back at once). Its
     * caller sees it when those failures outlasted the store's own retries. */
    WRITE_RETRY = 4,
    WRITE_FAILED = 5, /* a database error or a failed commit: nothing of the job was kept */
} write_result;

/* A db_status a job met, as its result: DB_DONE and DB_ROW are WRITE_OK, DB_CONSTRAINT
 * WRITE_CONFLICT, DB_BUSY WRITE_RETRY, anything else WRITE_FAILED. */
write_result write_result_of_db(db_status rc);
const char *write_result_name(write_result r);

/* Runs inside the job's savepoint. WRITE_OK keeps its writes, anything else undoes them; the
 * value is handed back to the caller of store_write. */
typedef write_result (*write_job_fn)(db_conn *db, void *ctx);

/* An additive change to a row that many jobs change, such as an account's balance or an hourly
 * volume bucket. Inside a write job it is held until the batch is about to commit, then applied
 * once per row with the batch's values combined, rows in one fixed order (by rank, statement
 * text, then key). A hot row is then locked for the last moment of a batch instead of from the
 * first job that touched it, and batches on several PostgreSQL connections (or nodes) take their
 * row locks in the same order, so they cannot deadlock on them. Only for changes whose outcome the
 * job does not need to see: a failure fails the whole batch. Outside a write job it is applied
 * at once. */
#define STORE_ADD_VALUES 6
typedef enum { ADD_KEY, ADD_SUM, ADD_MAX } store_add_kind;
typedef struct store_add {
    int rank;        /* rows of a lower rank are locked first: other jobs lock in that order */
    const char *sql; /* $1..$count are value[0..count); a literal or db_intern_sql text */
    int count;
    int64_t value[STORE_ADD_VALUES];
    store_add_kind kind[STORE_ADD_VALUES]; /* rows are identified by their ADD_KEY values */
} store_add;
db_status store_add_at_commit(db_conn *db, const store_add *add);
/* What this batch holds already for add's row, the sum of value[value] over the additions held
 * for it (0 outside a batch): a job that must not overflow the row checks the row plus this. */
int64_t store_held_sum(const store_add *add, int value);

typedef struct store_options {
    const char *url;
    int max_batch;    /* jobs per transaction; 1 = one transaction per job (the naive way) */
    int writer_conns; /* PostgreSQL: connections in the write pool when max_connections is 0 */
    /* PostgreSQL only: */
    int max_connections;     /* readers and writers together (a quarter write, at most cores + 1);
                              * 0: 2 × writer_conns */
    int64_t pool_timeout_ms; /* longest wait for a pooled connection; 0: 5 s */
    int64_t idle_timeout_ms; /* an idle pooled connection is closed after this; 0: 60 s */
    int64_t statement_timeout_ms; /* per session; 0: the server's setting */
    bool no_prepare;              /* PostgreSQL: no prepared statements (a transaction pooler) */
    int64_t lock_timeout_ms;      /* per session; 0: the server's setting */
    const char *application_name; /* shown in pg_stat_activity */
    /* SQLite only: each reader's page cache (0: 16 MB) and how much of the file every
     * connection maps (0: none) */
    int sqlite_cache_mb;
    int sqlite_mmap_mb;
    bool wait_for_database; /* open even when PostgreSQL is down, and keep trying */
    /* run once, on the first connection that works, after migrations (may be NULL) */
    int (*on_first_connect)(db_conn *db, void *arg);
    void *on_first_connect_arg;
} store_options;

#define STORE_BATCH_BUCKETS 18

typedef struct store_stats {
    int64_t jobs, batches, failed_commits;
    /* PostgreSQL: attempts run again after a deadlock or serialization failure (busy), and
     * optimistic batches run again with savepoints because a job in them failed (careful) */
    int64_t busy_retries, careful_reruns;
    int64_t unsynced_batches; /* SQLite: batches of store_submit_unsynced jobs, committed
                               * without an fsync */
    int64_t queue_depth;      /* jobs waiting right now */
    int64_t checkpoints;      /* SQLite: WAL checkpoints the writer ran */
    /* Batches by size: bucket b holds sizes in (2^(b-1), 2^b], so its upper bound is 2^b:
     * 1, 2, 3-4, 5-8, ... up to 2^17, above the largest --max-batch (100000). */
    int64_t batch_size_buckets[STORE_BATCH_BUCKETS];
} store_stats;

store *store_open(const store_options *opt, char *err, size_t errlen);
void store_close(store *s);
db_kind store_kind(const store *s);

/* Queues fn, blocks until its transaction committed (or failed), returns fn's result, or
 * WRITE_FAILED when the commit failed. */
write_result store_write(store *s, write_job_fn fn, void *ctx);
/* Queues fn and returns at once. When its transaction has committed (or failed), then runs on
 * the writer's thread with what store_write would have returned, the database failure it met
 * (for the caller's answer) and, when the store itself failed the job (its commit failed, or no
 * connection came), the database's reason (else NULL). It must not block, nor wait for a write
 * job (its own thread runs them); it may submit more. */
typedef void (*write_done_fn)(write_result result, db_failure failure, const char *error,
                              void *arg);
void store_submit(store *s, write_job_fn fn, void *ctx, write_done_fn then, void *then_arg);
/* The same for a job whose commit need not wait for the disk: on SQLite it commits in a batch
 * of such jobs alone, without an fsync, and its continuation runs at once. Its writes become
 * durable with the next synced commit (SQLite's WAL is replayed as a prefix: a synced commit
 * makes every earlier one durable; a power cut before it loses them together with everything
 * after them, while a killed process loses nothing the kernel was given). Only for a job whose
 * result reaches no client, and no other system, except through a later synced commit of this
 * store: the builtin processor's charge, which the payment it is for records. On PostgreSQL, and
 * with max_batch 1, it is store_submit. */
void store_submit_unsynced(store *s, write_job_fn fn, void *ctx, write_done_fn then,
                           void *then_arg);
/* The node's own upkeep (its node-id lease): fn in a transaction of its own that waits behind
 * no request's write and shares no batch with one, whose row locks may keep it for seconds. On
 * PostgreSQL it runs on a reader connection from the pool; SQLite's one writer waits on no row
 * lock, so there it is store_write. */
write_result store_run_upkeep(store *s, write_job_fn fn, void *ctx);
int64_t store_queue_depth(store *s);
void store_get_stats(store *s, store_stats *out);

/* Fault injection (tests): fail_job is asked before each job runs and a true answer fails it
 * as a database error would; at_commit is called just before (false) and after (true) each
 * commit. Set once at start; NULL for none. */
typedef struct store_faults {
    bool (*fail_job)(void);
    void (*at_commit)(bool committed);
} store_faults;
void store_set_faults(const store_faults *f);

/* This thread's read connection, or NULL (db_thread_failure() says whether the database is
 * down or no connection came free in time). SQLite: opened on first use and kept by the
 * thread. PostgreSQL: taken from the reader pool and held until store_thread_done. */
db_conn *store_reader(store *s);
/* The reads that follow on this thread, until store_thread_done, serve one request: on SQLite
 * they share one read snapshot, kept for the thread's next request while nothing commits. */
void store_request_begin(store *s);
/* Whether this thread's SQLite reader holds a read snapshot now (for tests). */
bool store_keeps_snapshot(store *s);
/* The end of a request's database work on this thread: a PostgreSQL reader goes back to
 * the pool (a broken one is closed, and the store marked down). */
void store_thread_done(store *s);
/* Returns the calling thread's reader, for threads that end before the store. */
void store_release_reader(store *s);
/* False while the database is known to be unreachable (or has never answered). */
bool store_available(store *s);
/* True from a write the database failed (a full disk, an I/O error, a failed commit) until one
 * is kept again, 3 s or more after the last failure; while true, an idle writer tries a small
 * write of its own every second. /readyz answers 503 meanwhile. */
bool store_writes_failing(store *s);

/* Brings the schema to the latest version. Returns 0 or -1 with err. */
int store_migrate(db_conn *c, char *err, size_t errlen);
/* Where the schema is, read without changing it (`payd migrate --status`): the highest version
 * the database records (0: none), the one this binary needs, and whether any of ours is
 * missing. */
typedef struct schema_status {
    int at, needed;
    bool pending;
} schema_status;
void store_schema_status(db_conn *c, schema_status *out);
/* The version the database was at when this process last migrated it (0: not yet, the
 * database was away): this binary's, or a newer release's above it. */
int store_schema_version(void);
/* A named secret generated once and kept in the database (so restarts and nodes share it). */
int store_secret(store *s, const char *name, uint8_t out[32]);
/* The same on a given connection, in its own transaction (for on_first_connect). */
int store_secret_on(db_conn *db, const char *name, uint8_t out[32]);

#endif

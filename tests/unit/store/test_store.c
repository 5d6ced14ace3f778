/* The group-commit store: many concurrent jobs share transactions, a job that fails undoes
 * only its own writes, and additions held until the commit (store_add_at_commit) go with the
 * job that made them. */
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/db.h"
#include "store/store.h"
#include "../writer_gate.h"

#define THREADS         32
#define JOBS_PER_THREAD 50
#define ACCOUNTS        3

typedef struct job_arg {
    int64_t n;
} job_arg;

/* Inserts a secret row and adds n to one of the accounts' balances at commit; odd jobs then
 * fail after writing, so their row and their addition must vanish. */
/* A row named prefix-n in secrets, the table these jobs write. */
static bool insert_secret(db_conn *db, const char *prefix, int64_t n)
{
    char name[32];
    snprintf(name, sizeof name, "%s-%lld", prefix, (long long)n);
    return db_exec(db, "INSERT INTO secrets (name, value) VALUES ($1, 'x')", "s", name) == DB_DONE;
}

static write_result insert_then_maybe_fail(db_conn *db, void *arg)
{
    job_arg *a = arg;
    if (!insert_secret(db, "job", a->n))
        return WRITE_FAILED;
    store_add add = {.sql = "UPDATE accounts SET balance = balance + $2, version = version + $3, "
                            "updated_at = $4 WHERE id = $1",
                     .count = 4,
                     .value = {1 + a->n % ACCOUNTS, a->n, 1, a->n},
                     .kind = {ADD_KEY, ADD_SUM, ADD_SUM, ADD_MAX}};
    if (store_add_at_commit(db, &add) != DB_DONE)
        return WRITE_FAILED;
    return a->n % 2 ? WRITE_REFUSED : WRITE_OK;
}

static write_result make_accounts(db_conn *db, void *arg)
{
    (void)arg;
    for (int id = 1; id <= ACCOUNTS; id++)
        if (db_exec(db,
                    "INSERT INTO accounts (id, user_id, currency, balance, version, created_at, "
                    "updated_at) VALUES ($1, 1, 'USD', 0, 1, 0, 0)",
                    "i", (int64_t)id) != DB_DONE)
            return WRITE_FAILED;
    return WRITE_OK;
}

typedef struct worker {
    store *s;
    int index;
    int failures, successes;
} worker;

static void *run_jobs(void *p)
{
    worker *w = p;
    for (int i = 0; i < JOBS_PER_THREAD; i++) {
        job_arg a = {.n = (int64_t)w->index * JOBS_PER_THREAD + i};
        write_result rc = store_write(w->s, insert_then_maybe_fail, &a);
        if (rc == WRITE_OK)
            w->successes++;
        else if (rc == WRITE_REFUSED)
            w->failures++;
    }
    store_release_reader(w->s);
    return NULL;
}

static void run(int max_batch, bool expect_batches)
{
    char path[] = "/tmp/payd-store-test-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    char err[256];
    store_options opt = {.url = path, .max_batch = max_batch};
    store *s = store_open(&opt, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(store_write(s, make_accounts, NULL), 0);
    pthread_t threads[THREADS];
    worker workers[THREADS] = {0};
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker){.s = s, .index = i};
        pthread_create(&threads[i], NULL, run_jobs, &workers[i]);
    }
    int ok = 0, failed = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        ok += workers[i].successes;
        failed += workers[i].failures;
    }
    assert_int_equal(ok, THREADS * JOBS_PER_THREAD / 2);
    assert_int_equal(failed, THREADS * JOBS_PER_THREAD / 2);

    db_conn *r = store_reader(s);
    db_stmt *st = db_query(r, "SELECT COUNT(*) FROM secrets WHERE name LIKE 'job-%'", "");
    assert_int_equal(db_step(st), DB_ROW);
    assert_int_equal(db_int(st, 0), ok); /* every kept job, no failed one */
    db_done(st);
    st = db_query(r, "SELECT COUNT(*) FROM secrets WHERE name IN ('job-1', 'job-3', 'job-5')", "");
    assert_int_equal(db_step(st), DB_ROW);
    assert_int_equal(db_int(st, 0), 0);
    db_done(st);
    /* each account holds exactly the additions of the kept (even) jobs, once each */
    for (int id = 1; id <= ACCOUNTS; id++) {
        int64_t balance = 0, kept = 0;
        for (int64_t n = 0; n < THREADS * JOBS_PER_THREAD; n++)
            if (n % 2 == 0 && 1 + n % ACCOUNTS == id) {
                balance += n;
                kept++;
            }
        st = db_query(r, "SELECT balance, version FROM accounts WHERE id = $1", "i", (int64_t)id);
        assert_int_equal(db_step(st), DB_ROW);
        assert_int_equal(db_int(st, 0), balance);
        assert_int_equal(db_int(st, 1), 1 + kept);
        db_done(st);
    }

    store_stats stats;
    store_get_stats(s, &stats);
    assert_int_equal(stats.jobs, THREADS * JOBS_PER_THREAD + 1);
    if (expect_batches)
        assert_true(stats.batches < stats.jobs); /* jobs shared transactions */
    else
        assert_int_equal(stats.batches, stats.jobs);
    store_close(s);
    unlink(path);
    char side[64];
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
}

static void test_group_commit_isolates_failed_jobs(void **state)
{
    run(64, true);
}

/* The one mapping from a db_status a job met to what it came to: a constraint is a conflict,
 * never a failure, and a failure is never a conflict. */
static void test_write_result_mapping(void **state)
{
    (void)state;
    assert_int_equal(write_result_of_db(DB_DONE), WRITE_OK);
    assert_int_equal(write_result_of_db(DB_CONSTRAINT), WRITE_CONFLICT);
    assert_int_equal(write_result_of_db(DB_BUSY), WRITE_RETRY);
    assert_int_equal(write_result_of_db(DB_ERROR), WRITE_FAILED);
    assert_int_equal(write_result_of_db(DB_UNAVAILABLE), WRITE_FAILED);
}

static void test_one_transaction_per_job(void **state)
{
    run(1, false);
}

/* ---- read snapshots kept between requests (SQLite) ---- */

typedef struct temp_db {
    char path[64];
    store *s;
} temp_db;

static void temp_db_open_batching(temp_db *t, int max_batch)
{
    snprintf(t->path, sizeof t->path, "/tmp/payd-store-test-XXXXXX");
    close(mkstemp(t->path));
    char err[256];
    store_options opt = {.url = t->path, .max_batch = max_batch};
    t->s = store_open(&opt, err, sizeof err);
    assert_non_null(t->s);
    assert_int_equal(store_write(t->s, make_accounts, NULL), 0);
}

static void temp_db_open(temp_db *t)
{
    temp_db_open_batching(t, 64);
}

static void temp_db_close(temp_db *t)
{
    store_close(t->s);
    char side[80];
    unlink(t->path);
    snprintf(side, sizeof side, "%s-wal", t->path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", t->path);
    unlink(side);
}

/* One request's read of account 1's balance, as the pipeline brackets it. */
static int64_t request_reads_balance(store *s)
{
    store_request_begin(s);
    db_conn *r = store_reader(s);
    db_stmt *st = db_query(r, "SELECT balance FROM accounts WHERE id = 1", "");
    assert_int_equal(db_step(st), DB_ROW);
    int64_t balance = db_int(st, 0);
    db_done(st);
    store_thread_done(s);
    return balance;
}

static write_result add_to_balance(db_conn *db, void *arg)
{
    return db_exec(db, "UPDATE accounts SET balance = balance + $1 WHERE id = 1", "i",
                   *(int64_t *)arg) == DB_DONE
               ? WRITE_OK
               : WRITE_FAILED;
}

/* A request reads what committed before it began, whoever committed it: this store's writer or
 * another connection (as another process would), although its thread kept the snapshot of the
 * request before. */
static void test_a_kept_snapshot_never_hides_a_commit(void **state)
{
    (void)state;
    temp_db t;
    temp_db_open(&t);
    assert_int_equal(request_reads_balance(t.s), 0);
    assert_true(store_keeps_snapshot(t.s)); /* kept for the next request */
    assert_int_equal(request_reads_balance(t.s), 0);

    int64_t add = 5;
    assert_int_equal(store_write(t.s, add_to_balance, &add), 0);
    assert_int_equal(request_reads_balance(t.s), 5);

    char err[256];
    db_conn *other = db_open(t.path, false, err, sizeof err);
    assert_non_null(other);
    assert_int_equal(db_exec(other, "UPDATE accounts SET balance = 40 WHERE id = 1", ""), DB_DONE);
    assert_int_equal(request_reads_balance(t.s), 40);
    db_close(other);

    /* a read outside any request ends the kept snapshot and runs on its own */
    store_reader(t.s);
    assert_false(store_keeps_snapshot(t.s));
    store_release_reader(t.s);
    temp_db_close(&t);
}

static write_result insert_big_secret(db_conn *db, void *arg)
{
    static char value[12001];
    if (!value[0])
        memset(value, 'v', sizeof value - 1);
    char name[32];
    snprintf(name, sizeof name, "big-%lld", (long long)*(int64_t *)arg);
    return db_exec(db, "INSERT INTO secrets (name, value) VALUES ($1, $2)", "ss", name, value) ==
                   DB_DONE
               ? WRITE_OK
               : WRITE_FAILED;
}

static void *park_a_snapshot(void *arg)
{
    request_reads_balance(arg);
    return NULL; /* the thread ends, its snapshot stays parked: an idle HTTP thread's */
}

/* A parked snapshot would pin the WAL (no checkpoint past it, no start over): the writer ends
 * it before checkpointing, so the WAL stays near the checkpoint size however much is written.
 * ~3,000 pages are written here; with the snapshot left alone the WAL would hold them all. */
static void test_a_parked_snapshot_does_not_pin_the_wal(void **state)
{
    (void)state;
    temp_db t;
    temp_db_open(&t);
    pthread_t idle;
    pthread_create(&idle, NULL, park_a_snapshot, t.s);
    pthread_join(idle, NULL);
    for (int64_t n = 0; n < 700; n++)
        assert_int_equal(store_write(t.s, insert_big_secret, &n), 0);
    char wal[80];
    snprintf(wal, sizeof wal, "%s-wal", t.path);
    struct stat st;
    assert_int_equal(stat(wal, &st), 0);
    long pages = (long)(st.st_size / (4096 + 24));
    print_message("WAL after ~3,000 pages written: %ld pages\n", pages);
    assert_true(pages < 1500);
    temp_db_close(&t);
}

/* 400 rows of 12 KB: ~1,700 WAL pages (~4.3 a row, as the test above writes), past the
 * 1,000-page mark where the writer checkpoints. */
static void *write_past_a_checkpoint(void *arg)
{
    for (int64_t n = 0; n < 400; n++)
        assert_int_equal(store_write(arg, insert_big_secret, &n), 0);
    return NULL;
}

/* The writer counts its checkpoints; with no reader holding a snapshot the WAL starts over
 * after each, so the schema's pages and ~1,700 more take one or two, not one per commit once
 * the WAL is past 1,000 pages (a couple of hundred here). */
static void test_checkpoints_are_counted(void **state)
{
    (void)state;
    temp_db t;
    temp_db_open(&t);
    store_stats before, after;
    store_get_stats(t.s, &before);
    write_past_a_checkpoint(t.s);
    store_get_stats(t.s, &after);
    int64_t checkpoints = after.checkpoints - before.checkpoints;
    print_message("checkpoints for 400 rows of 12 KB: %lld\n", (long long)checkpoints);
    assert_true(checkpoints >= 1 && checkpoints <= 3);
    temp_db_close(&t);
}

/* A snapshot a request still used while a checkpoint ran is ended when the request is done,
 * not parked: parked, it would keep the WAL from starting over at the next write, and the
 * writer would checkpoint again at once for the few pages written since, with a full
 * fdatasync of the database. A request that saw no checkpoint keeps its snapshot as before. */
static void test_a_snapshot_in_use_across_a_checkpoint_is_not_parked(void **state)
{
    (void)state;
    temp_db t;
    temp_db_open(&t);
    store_request_begin(t.s);
    db_conn *r = store_reader(t.s);
    db_stmt *st = db_query(r, "SELECT balance FROM accounts WHERE id = 1", "");
    assert_int_equal(db_step(st), DB_ROW);
    db_done(st);
    /* written by another thread while this request holds its snapshot: the writer
     * checkpoints meanwhile */
    pthread_t writer;
    pthread_create(&writer, NULL, write_past_a_checkpoint, t.s);
    pthread_join(writer, NULL);
    store_thread_done(t.s);
    assert_false(store_keeps_snapshot(t.s));

    assert_int_equal(request_reads_balance(t.s), 0);
    assert_true(store_keeps_snapshot(t.s)); /* no checkpoint meanwhile: kept */
    store_release_reader(t.s);
    temp_db_close(&t);
}

/* ---- jobs queued while a batch runs join its commit ---- */

typedef struct held_job {
    sem_t running, go;
    bool waited; /* the first run waits; a careful rerun does not */
    int64_t n;
} held_job;

/* Inserts its row, then (on its first run) waits until the test has queued the next jobs. */
static write_result insert_and_hold(db_conn *db, void *arg)
{
    held_job *h = arg;
    if (!insert_secret(db, "held", h->n))
        return WRITE_FAILED;
    if (!h->waited) {
        h->waited = true;
        sem_post(&h->running);
        sem_wait(&h->go);
    }
    return WRITE_OK;
}

typedef struct submitted {
    sem_t done;
    write_result result;
} submitted;

static void job_done(write_result result, db_failure failure, const char *error, void *arg)
{
    (void)failure;
    (void)error;
    submitted *d = arg;
    d->result = result;
    sem_post(&d->done);
}

static int64_t secrets_named(store *s, const char *name)
{
    db_conn *r = store_reader(s);
    db_stmt *st = db_query(r, "SELECT COUNT(*) FROM secrets WHERE name = $1", "s", name);
    assert_int_equal(db_step(st), DB_ROW);
    int64_t n = db_int(st, 0);
    db_done(st);
    store_thread_done(s);
    return n;
}

/* The first job holds its batch open until two more are queued: both run before its COMMIT, in
 * the same transaction (one batch of three jobs), and the one that fails (odd n) undoes only its
 * own writes. */
static void test_jobs_queued_during_a_batch_join_its_commit(void **state)
{
    (void)state;
    temp_db t;
    temp_db_open(&t);
    store_stats before, after;
    store_get_stats(t.s, &before);

    held_job first = {.n = 100};
    sem_init(&first.running, 0, 0);
    sem_init(&first.go, 0, 0);
    submitted d[3];
    for (int i = 0; i < 3; i++)
        sem_init(&d[i].done, 0, 0);
    store_submit(t.s, insert_and_hold, &first, job_done, &d[0]);
    sem_wait(&first.running);
    job_arg kept = {.n = 2}, failing = {.n = 3};
    store_submit(t.s, insert_then_maybe_fail, &kept, job_done, &d[1]);
    store_submit(t.s, insert_then_maybe_fail, &failing, job_done, &d[2]);
    sem_post(&first.go);
    for (int i = 0; i < 3; i++)
        sem_wait(&d[i].done);

    assert_int_equal(d[0].result, WRITE_OK);
    assert_int_equal(d[1].result, WRITE_OK);
    assert_int_equal(d[2].result, WRITE_REFUSED);
    store_get_stats(t.s, &after);
    assert_int_equal(after.jobs - before.jobs, 3);
    assert_int_equal(after.batches - before.batches, 1);
    assert_int_equal(secrets_named(t.s, "held-100"), 1);
    assert_int_equal(secrets_named(t.s, "job-2"), 1);
    assert_int_equal(secrets_named(t.s, "job-3"), 0);
    temp_db_close(&t);
}

/* ---- jobs that need no sync of their own (store_submit_unsynced) ---- */

/* The writer connection's synchronous setting, as a job sees it: 0 OFF, 2 FULL. */
static int64_t synchronous_setting(db_conn *db)
{
    db_stmt *st = db_query(db, "PRAGMA synchronous", "");
    int64_t v = db_step(st) == DB_ROW ? db_int(st, 0) : -1;
    db_done(st);
    return v;
}

typedef struct sync_probe {
    store *s;
    const char *name;
    int64_t seen;                   /* synchronous_setting() while the job ran */
    struct sync_probe *then_submit; /* submitted (synced) from this job's continuation */
    write_result result;            /* what the job came to (asserted on the test's thread) */
    sem_t done;
} sync_probe;

static write_result insert_and_probe(db_conn *db, void *arg)
{
    sync_probe *p = arg;
    p->seen = synchronous_setting(db);
    return db_exec(db, "INSERT INTO secrets (name, value) VALUES ($1, 'x')", "s", p->name) ==
                   DB_DONE
               ? WRITE_OK
               : WRITE_FAILED;
}

static void probe_done(write_result result, db_failure failure, const char *error, void *arg)
{
    (void)failure;
    (void)error;
    sync_probe *p = arg;
    p->result = result;
    if (p->then_submit)
        store_submit(p->s, insert_and_probe, p->then_submit, probe_done, p->then_submit);
    sem_post(&p->done);
}

/* Queued behind a synced job, an unsynced one commits first, in a batch of its own with
 * synchronous OFF; the job its continuation submits (a payment's record after its charge) joins
 * the synced batch that follows, which commits with synchronous FULL again. */
static void test_an_unsynced_job_commits_first_and_its_followup_joins_the_synced_batch(void **state)
{
    (void)state;
    temp_db t;
    temp_db_open(&t);
    writer_gate g;
    writer_gate_close(t.s, &g);

    sync_probe followup = {.s = t.s, .name = "followup"};
    sync_probe synced = {.s = t.s, .name = "synced"};
    sync_probe unsynced = {.s = t.s, .name = "unsynced", .then_submit = &followup};
    sem_init(&followup.done, 0, 0);
    sem_init(&synced.done, 0, 0);
    sem_init(&unsynced.done, 0, 0);
    store_stats before, after;
    store_get_stats(t.s, &before);
    store_submit(t.s, insert_and_probe, &synced, probe_done, &synced);
    store_submit_unsynced(t.s, insert_and_probe, &unsynced, probe_done, &unsynced);
    writer_gate_open(&g);
    sem_wait(&unsynced.done);
    sem_wait(&synced.done);
    sem_wait(&followup.done);

    assert_int_equal(unsynced.result, 0);
    assert_int_equal(synced.result, 0);
    assert_int_equal(followup.result, 0);
    assert_int_equal(unsynced.seen, 0);
    assert_int_equal(synced.seen, 2);
    assert_int_equal(followup.seen, 2);
    store_get_stats(t.s, &after);
    assert_int_equal(after.unsynced_batches - before.unsynced_batches, 1);
    assert_int_equal(after.batches - before.batches, 2); /* [unsynced], [synced, followup] */
    assert_int_equal(secrets_named(t.s, "unsynced"), 1);
    assert_int_equal(secrets_named(t.s, "followup"), 1);
    temp_db_close(&t);
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

typedef struct jobs_done {
    sem_t done;
    int failed; /* written on the writer's thread only, read after every job is done */
} jobs_done;

static void count_done(write_result result, db_failure failure, const char *error, void *arg)
{
    (void)failure;
    (void)error;
    jobs_done *d = arg;
    d->failed += result != WRITE_OK;
    sem_post(&d->done);
}

/* No checkpoint after an unsynced commit: it would copy into the database pages the WAL does
 * not hold on disk yet. The next synced commit that writes checkpoints. ~1,200 pages are
 * written (the checkpoint threshold is 1,000). */
static void test_no_checkpoint_follows_an_unsynced_commit(void **state)
{
    (void)state;
    temp_db t;
    temp_db_open(&t);
    int64_t db_before = file_size(t.path);
    jobs_done d = {0};
    sem_init(&d.done, 0, 0);
    int64_t n[400];
    for (int i = 0; i < 400; i++) {
        n[i] = i;
        store_submit_unsynced(t.s, insert_big_secret, &n[i], count_done, &d);
    }
    for (int i = 0; i < 400; i++)
        sem_wait(&d.done);
    assert_int_equal(d.failed, 0);
    assert_int_equal(file_size(t.path), db_before);
    job_arg one = {.n = 0}; /* a commit that writes a page: the WAL hook runs after those */
    assert_int_equal(store_write(t.s, insert_then_maybe_fail, &one), 0);
    assert_true(file_size(t.path) > db_before + 1000 * 4096);
    temp_db_close(&t);
}

/* A round with unsynced jobs stays within --max-batch, and so within the writer's array of
 * jobs: the synced batch after the unsynced one, joined by what is queued, holds 4 jobs at
 * most here (under AddressSanitizer, a batch that filled the array from past its head fails). */
static void test_a_round_with_unsynced_jobs_stays_within_max_batch(void **state)
{
    (void)state;
    temp_db t;
    temp_db_open_batching(&t, 4);
    writer_gate g;
    writer_gate_close(t.s, &g);

    store_stats before, after;
    store_get_stats(t.s, &before);
    jobs_done d = {0};
    sem_init(&d.done, 0, 0);
    /* the writer takes 4 (one unsynced), then the synced three are joined by the rest */
    job_arg args[8];
    for (int i = 0; i < 8; i++) {
        args[i] = (job_arg){.n = 2 * (100 + i)}; /* even: the job keeps its writes */
        if (i == 1)
            store_submit_unsynced(t.s, insert_then_maybe_fail, &args[i], count_done, &d);
        else
            store_submit(t.s, insert_then_maybe_fail, &args[i], count_done, &d);
    }
    writer_gate_open(&g);
    for (int i = 0; i < 8; i++)
        sem_wait(&d.done);
    assert_int_equal(d.failed, 0);
    store_get_stats(t.s, &after);
    assert_int_equal(after.unsynced_batches - before.unsynced_batches, 1);
    for (int b = 3; b < STORE_BATCH_BUCKETS; b++) /* bucket 2 holds batches of 3-4 jobs */
        assert_int_equal(after.batch_size_buckets[b], 0);
    temp_db_close(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_commit_isolates_failed_jobs),
        cmocka_unit_test(test_one_transaction_per_job),
        cmocka_unit_test(test_write_result_mapping),
        cmocka_unit_test(test_a_kept_snapshot_never_hides_a_commit),
        cmocka_unit_test(test_a_parked_snapshot_does_not_pin_the_wal),
        cmocka_unit_test(test_a_snapshot_in_use_across_a_checkpoint_is_not_parked),
        cmocka_unit_test(test_checkpoints_are_counted),
        cmocka_unit_test(test_jobs_queued_during_a_batch_join_its_commit),
        cmocka_unit_test(
            test_an_unsynced_job_commits_first_and_its_followup_joins_the_synced_batch),
        cmocka_unit_test(test_no_checkpoint_follows_an_unsynced_commit),
        cmocka_unit_test(test_a_round_with_unsynced_jobs_stays_within_max_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

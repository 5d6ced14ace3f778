/* PostgreSQL: group commit.
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

#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/log.h"
#include "store/store_internal.h"

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
 * failure it reported as a plain failure is still one (WRITE_RETRY): the job runs again. */
static write_result pg_run_job(db_conn *db, write_job *job, bool settle)
{
    db_clear_busy(db);
    db_failure before = db_thread_failure();
    db_thread_failure_reset();
    write_result result = store_run_job(db, job);
    if (settle && result == WRITE_OK)
        result = write_result_of_db(db_flush(db));
    job->failure = db_thread_failure(); /* a lock or statement timeout, for its caller */
    db_note_failure(before);
    if (result != WRITE_OK && db_saw_busy(db))
        result = WRITE_RETRY;
    return result;
}

/* The end of an attempt: the held additions and COMMIT. A connection lost meanwhile leaves the
 * outcome unknown. */
static batch_end pg_commit(db_conn *db)
{
    db_status rc = store_commit(db);
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
    store_held_adds_rewind(0);
    db_begin(db); /* sent with the first job's first statement */
    for (int i = 0; i < n; i++) {
        /* a held write that failed its check fails the job it ran in, or a later one (whose
         * careful rerun then tells which); the last job's are settled before COMMIT */
        write_result result = pg_run_job(db, jobs[i], i == n - 1);
        int deferred = db_take_deferred_failure(db);
        if (deferred) /* it came first: what failed after it follows from it */
            result = store_result_of_code(deferred);
        if (db_broken(db))
            return BATCH_LOST;
        /* a job that swallowed an error (a timeout it took for "no row") left the transaction
         * aborted: its COMMIT would roll back and still report success */
        bool swallowed = result == WRITE_OK && db_transaction_failed(db);
        jobs[i]->result = result;
        if (swallowed)
            store_fail_job(jobs[i]);
        if (result != WRITE_OK || swallowed) {
            db_exec(db, "ROLLBACK", "");
            if (n > 1)
                return BATCH_CAREFULLY;
            if (swallowed)
                return BATCH_FAILED;
            return result == WRITE_RETRY ? BATCH_BUSY : BATCH_COMMITTED; /* nothing to keep */
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
    store_held_adds_rewind(0);
    db_begin(db);
    if (db_exec_script(db, "SAVEPOINT job") != DB_DONE)
        return db_broken(db) ? BATCH_LOST : BATCH_FAILED;
    for (int i = 0; i < n; i++) {
        bool last = i == n - 1;
        busy[i] = false;
        int mark = store_held_adds_mark();
        write_result result = pg_run_job(db, jobs[i], false);
        bool store_failed = false;
        if (db_broken(db))
            return BATCH_LOST;
        /* RELEASE fails when the job swallowed an error that aborted its savepoint: then
         * nothing it did can be kept */
        if (result != WRITE_OK ||
            db_exec_script(db, last ? "RELEASE job" : "RELEASE job; SAVEPOINT job") != DB_DONE) {
            if (db_exec_script(db, last ? "ROLLBACK TO job; RELEASE job"
                                        : "ROLLBACK TO job; RELEASE job; SAVEPOINT job") != DB_DONE)
                return db_broken(db) ? BATCH_LOST : BATCH_FAILED;
            if (result == WRITE_OK) { /* an error it swallowed: a deadlock is still one */
                result = db_saw_busy(db) ? WRITE_RETRY : WRITE_FAILED;
                store_failed = result == WRITE_FAILED;
            }
            store_held_adds_rewind(mark); /* what the job held goes with its writes */
        }
        jobs[i]->result = result;
        if (store_failed)
            store_fail_job(jobs[i]);
        busy[i] = result == WRITE_RETRY;
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
    s->stats.batch_size_buckets[store_batch_bucket(n)] += batches;
    pthread_mutex_unlock(&s->lock);
    store_settle_batch_failures(s, jobs, n);
    for (int i = 0; i < n; i++)
        store_job_finished(jobs[i]);
}

void store_pg_run_batch(store *s, write_job **jobs, int n)
{
    /* jobs that waited longer than a request may wait for a connection are answered at once
     * (503 overloaded): the writers are behind, and they would only fall further behind */
    int64_t too_old = store_clock_ns() - s->opt.pool_timeout_ms * 1000000;
    int fresh = 0;
    for (int i = 0; i < n; i++) {
        if (jobs[i]->queued_ns < too_old) {
            store_fail_job(jobs[i]);
            jobs[i]->failure = DB_FAILURE_TIMEOUT;
            store_job_finished(jobs[i]);
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
        store_fail_job(jobs[i]);
        jobs[i]->failure = DB_FAILURE_NONE;
    }
    write_job **todo = jobs;
    int count = n;
    while (count > 0) {
        db_thread_failure_reset();
        db_conn *db = pg_pool_take(s, &s->writer_pool);
        if (!db) {
            for (int i = 0; i < count; i++) {
                store_fail_job(todo[i]);
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
        pg_pool_give(s, &s->writer_pool, db);
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
                    store_fail_job(todo[i]);
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

void store_pg_start_writers(store *s)
{
    s->pg_writer_count = s->writer_pool.max;
    s->pg_writers = calloc((size_t)s->pg_writer_count, sizeof *s->pg_writers);
    for (int i = 0; i < s->pg_writer_count; i++) {
        pthread_create(&s->pg_writers[i], NULL, store_writer_main, s);
        pthread_setname_np(s->pg_writers[i], "db-writer");
    }
}

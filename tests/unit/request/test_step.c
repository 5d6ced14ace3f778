/* A request's write job run again answers afresh: the store runs a batch's jobs again when one
 * of them fails, and on PostgreSQL a second run may see another state than the first (other
 * connections commit between them). A run must not keep what an earlier run answered. */
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
#include <unistd.h>

#include <cmocka.h>

#include "node/app.h"
#include "request/request.h"
#include "request/step.h"
#include "store/store.h"
#include "../writer_gate.h"

static write_result always_fails(db_conn *db, void *arg)
{
    (void)db;
    (void)arg;
    return WRITE_REFUSED;
}

static void job_done(write_result result, db_failure failure, const char *error, void *arg)
{
    (void)result;
    (void)failure;
    (void)error;
    sem_post(arg);
}

typedef struct refund_like {
    request *req;
    int runs;
} refund_like;

/* What the refund's reserve job does when two runs see different states: the first finds
 * nothing left (answers 409 and keeps nothing), the second reserves (writes, answers nothing
 * yet: a later step will). */
static write_result reserve_on_second_run(db_conn *db, void *arg)
{
    refund_like *r = arg;
    if (++r->runs == 1) {
        reply_error(r->req, ERR_AMOUNT_EXCEEDS_REFUNDABLE, "nothing left to refund");
        return WRITE_OK;
    }
    return db_exec(db, "INSERT INTO secrets (name, value) VALUES ('reserved', 'x')", "") == DB_DONE
               ? WRITE_OK
               : WRITE_FAILED;
}

static step_result after_write(request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return STEP_DONE;
}

/* A store of its own and a request on it, as the recoverer runs one (no runner: waits block). */
typedef struct harness {
    char path[64];
    app a;
    request req;
} harness;

static void harness_open(harness *h)
{
    snprintf(h->path, sizeof h->path, "/tmp/payd-step-test-XXXXXX");
    close(mkstemp(h->path));
    char err[256];
    store_options opt = {.url = h->path, .max_batch = 64};
    h->a = (app){.store = store_open(&opt, err, sizeof err)};
    assert_non_null(h->a.store);
    h->req = (request){.app = &h->a};
    arena_init(&h->req.arena);
    reply_header(&h->req, "RateLimit-Limit", "100"); /* set before any job: it stays */
}

static void harness_close(harness *h)
{
    store_close(h->a.store);
    free(h->req.resp_body);
    arena_free(&h->req.arena);
    const char *sides[] = {"", "-wal", "-shm", ".lock"};
    for (int i = 0; i < 4; i++) {
        char side[80];
        snprintf(side, sizeof side, "%s%s", h->path, sides[i]);
        unlink(side);
    }
}

typedef struct request_job {
    request *req;
    write_job_fn fn;
    void *ctx;
} request_job;

static void *write_for_request(void *arg)
{
    request_job *j = arg;
    request_write_then(j->req, j->fn, j->ctx, after_write); /* no runner: blocks */
    return NULL;
}

static void wait_for_queue(store *s, int64_t depth)
{
    while (store_queue_depth(s) < depth)
        usleep(1000);
}

/* Runs fn(db, ctx) as the request's write job in a batch that runs it twice: a job queued
 * behind it fails, so the batch is run again job by job. */
static void write_in_a_batch_run_again(harness *h, write_job_fn fn, void *ctx)
{
    writer_gate g;
    writer_gate_close(h->a.store, &g);
    request_job j = {&h->req, fn, ctx};
    pthread_t t;
    pthread_create(&t, NULL, write_for_request, &j);
    wait_for_queue(h->a.store, 1);
    sem_t failed_done;
    sem_init(&failed_done, 0, 0);
    store_submit(h->a.store, always_fails, NULL, job_done, &failed_done);
    wait_for_queue(h->a.store, 2);
    writer_gate_open(&g);
    pthread_join(t, NULL);
    sem_wait(&failed_done);
}

static int64_t reserved_rows(harness *h)
{
    db_conn *db = store_reader(h->a.store);
    db_stmt *st = db_query(db, "SELECT COUNT(*) FROM secrets WHERE name = 'reserved'", "");
    assert_int_equal(db_step(st), DB_ROW);
    int64_t n = db_int(st, 0);
    db_done(st);
    store_release_reader(h->a.store);
    return n;
}

static void test_a_job_run_again_does_not_keep_an_earlier_runs_answer(void **state)
{
    (void)state;
    harness h;
    harness_open(&h);
    refund_like r = {.req = &h.req};
    write_in_a_batch_run_again(&h, reserve_on_second_run, &r);

    assert_int_equal(r.runs, 2);
    assert_int_equal(h.req.write_result, WRITE_OK);
    assert_int_equal(h.req.status, 0); /* the second run's: no answer yet, not the first's 409 */
    assert_int_equal(h.req.error, ERR_NONE);
    assert_int_equal(h.req.resp_header_count, 1);
    assert_string_equal(response_header(&h.req, "RateLimit-Limit"), "100");
    assert_int_equal(reserved_rows(&h), 1);
    harness_close(&h);
}

/* A job that only writes, queued after the request has its answer (the void of a charge no
 * payment will carry, while the answer says another request took the key). */
static write_result write_only(db_conn *db, void *arg)
{
    int *runs = arg;
    ++*runs;
    return db_exec(db, "INSERT INTO secrets (name, value) VALUES ('reserved', 'x')", "") == DB_DONE
               ? WRITE_OK
               : WRITE_FAILED;
}

static void test_an_answer_set_before_the_job_stays(void **state)
{
    (void)state;
    harness h;
    harness_open(&h);
    reply_error(&h.req, ERR_REQUEST_IN_PROGRESS, "another request took over this key");
    int runs = 0;
    write_in_a_batch_run_again(&h, write_only, &runs);

    assert_int_equal(runs, 2);
    assert_int_equal(h.req.write_result, WRITE_OK);
    assert_int_equal(h.req.status, 409);
    assert_int_equal(h.req.error, ERR_REQUEST_IN_PROGRESS);
    assert_string_equal(response_header(&h.req, "RateLimit-Limit"), "100");
    assert_int_equal(reserved_rows(&h), 1);
    harness_close(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_job_run_again_does_not_keep_an_earlier_runs_answer),
        cmocka_unit_test(test_an_answer_set_before_the_job_stays),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

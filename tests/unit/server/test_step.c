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
#include "writer_gate.h"

static int always_fails(db_conn *db, void *arg)
{
    (void)db;
    (void)arg;
    return 1;
}

static void job_done(int result, db_failure failure, const char *error, void *arg)
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
static int reserve_on_second_run(db_conn *db, void *arg)
{
    refund_like *r = arg;
    if (++r->runs == 1) {
        reply_error(r->req, ERR_AMOUNT_EXCEEDS_REFUNDABLE, "nothing left to refund");
        return 0;
    }
    return db_exec(db, "INSERT INTO secrets (name, value) VALUES ('reserved', 'x')", "") == DB_DONE
               ? 0
               : -1;
}

static step_result after_write(request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return STEP_DONE;
}

static void *write_for_request(void *arg)
{
    refund_like *r = arg;
    request_write_then(r->req, reserve_on_second_run, r, after_write); /* no runner: blocks */
    return NULL;
}

static void wait_for_queue(store *s, int64_t depth)
{
    while (store_queue_depth(s) < depth)
        usleep(1000);
}

static void test_a_job_run_again_does_not_keep_an_earlier_runs_answer(void **state)
{
    (void)state;
    char path[] = "/tmp/payd-step-test-XXXXXX";
    close(mkstemp(path));
    char err[256];
    store_options opt = {.url = path, .max_batch = 64};
    app a = {.store = store_open(&opt, err, sizeof err)};
    assert_non_null(a.store);
    request req = {.app = &a};
    arena_init(&req.arena);
    reply_header(&req, "RateLimit-Limit", "100"); /* set before the job: it stays */

    writer_gate g;
    writer_gate_close(a.store, &g);
    /* one batch: the request's job, then one that fails, so the batch runs again job by job */
    refund_like r = {.req = &req};
    pthread_t t;
    pthread_create(&t, NULL, write_for_request, &r);
    wait_for_queue(a.store, 1);
    sem_t failed_done;
    sem_init(&failed_done, 0, 0);
    store_submit(a.store, always_fails, NULL, job_done, &failed_done);
    wait_for_queue(a.store, 2);
    writer_gate_open(&g);
    pthread_join(t, NULL);
    sem_wait(&failed_done);

    assert_int_equal(r.runs, 2);
    assert_int_equal(req.write_rc, 0);
    assert_int_equal(req.status, 0); /* the second run's: no answer yet, not the first's 409 */
    assert_int_equal(req.error, ERR_NONE);
    assert_int_equal(req.resp_header_count, 1);
    assert_string_equal(response_header(&req, "RateLimit-Limit"), "100");

    db_conn *db = store_reader(a.store);
    db_stmt *st = db_query(db, "SELECT COUNT(*) FROM secrets WHERE name = 'reserved'", "");
    assert_int_equal(db_step(st), DB_ROW);
    assert_int_equal(db_int(st, 0), 1);
    db_done(st);
    store_release_reader(a.store);
    store_close(a.store);
    free(req.resp_body);
    arena_free(&req.arena);
    char side[64];
    unlink(path);
    snprintf(side, sizeof side, "%s-wal", path);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", path);
    unlink(side);
    snprintf(side, sizeof side, "%s.lock", path);
    unlink(side);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_job_run_again_does_not_keep_an_earlier_runs_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

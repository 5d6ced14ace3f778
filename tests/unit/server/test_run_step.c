/* The pipeline's handler step (server/pipeline.c, run_step): the step's answer stands unless
 * its database work failed, which is a 503 with Retry-After whatever the step concluded, and
 * then the request's idempotency key is settled as the answer says: stored, or left in doubt
 * for the retry. On a real SQLite store; no runner, as the recoverer runs requests. */
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

#include "core/canonical.h"
#include "idem/idem.h"
#include "node/app.h"
#include "node/metrics.h"
#include "server/pipeline.h"
#include "store/db.h"
#include "store/store.h"

typedef struct node {
    char path[64];
    app a;
} node;

static void node_open(node *n)
{
    snprintf(n->path, sizeof n->path, "/tmp/payd-run-step-test-XXXXXX");
    close(mkstemp(n->path));
    char err[256];
    store_options opt = {.url = n->path, .max_batch = 64};
    n->a = (app){.store = store_open(&opt, err, sizeof err), .metrics = metrics_create()};
    assert_non_null(n->a.store);
    n->a.cfg.idempotency_ttl_ms = 24 * 3600 * 1000;
    n->a.cfg.idempotency_lock_timeout_ms = 60 * 1000;
}

static void node_close(node *n)
{
    store_close(n->a.store);
    metrics_free(n->a.metrics);
    const char *sides[] = {"", "-wal", "-shm", ".lock"};
    for (int i = 0; i < 4; i++) {
        char side[80];
        snprintf(side, sizeof side, "%s%s", n->path, sides[i]);
        unlink(side);
    }
}

static const route create_payment = {
    .method = "POST", .pattern = "/v1/payments", .name = "/v1/payments"};

static request *new_request(node *n)
{
    request *req = calloc(1, sizeof *req);
    arena_init(&req->arena);
    req->app = &n->a;
    req->method = "POST";
    req->path = "/v1/payments";
    req->route = &create_payment;
    req->user.id = 3;
    req->authenticated = true;
    snprintf(req->request_id, sizeof req->request_id, "req_run_step");
    return req;
}

static step_result noted(request *req, void *ctx)
{
    (void)req;
    (void)ctx;
    return STEP_DONE;
}

/* The request with key claimed, as the pipeline's idempotency step leaves it. */
static request *keyed_request(node *n, const char *key)
{
    request *req = new_request(n);
    req->idem = arena_alloc(&req->arena, sizeof *req->idem);
    snprintf(req->idem->key, sizeof req->idem->key, "%s", key);
    req->idem->canonical_body = strdup("{}");
    request_fingerprint(req->method, req->path, "{}", req->idem->fingerprint);
    idem_claim_then(req, noted, NULL);
    assert_int_equal(req->status, 0);
    return req;
}

static void key_state(node *n, const char *key, char *state, size_t len)
{
    db_conn *db = store_reader(n->a.store);
    db_stmt *st = db_query(
        db, "SELECT state FROM idempotency_keys WHERE user_id = 3 AND idem_key = $1", "s", key);
    assert_int_equal(db_step(st), DB_ROW);
    snprintf(state, len, "%s", db_text(st, 0));
    db_done(st);
    store_release_reader(n->a.store);
}

static void answers_created(request *req)
{
    reply_raw(req, 201, "{\"id\":\"pay_1\"}", 14);
}

static void answers_created_but_the_database_went_away(request *req)
{
    answers_created(req);
    db_note_failure(DB_FAILURE_UNAVAILABLE);
}

static void answers_created_but_a_statement_timed_out(request *req)
{
    answers_created(req);
    db_note_failure(DB_FAILURE_TIMEOUT);
}

static void test_the_steps_answer_stands_and_its_key_is_stored(void **state)
{
    (void)state;
    node n;
    node_open(&n);
    request *req = keyed_request(&n, "k-ok");
    db_thread_failure_reset();
    run_step(req, answers_created);
    assert_int_equal(req->status, 201);
    char st[16];
    key_state(&n, "k-ok", st, sizeof st);
    assert_string_equal(st, "completed");
    request_free(req);
    node_close(&n);
}

static void test_a_database_failure_is_a_503_whatever_the_step_said(void **state)
{
    (void)state;
    node n;
    node_open(&n);
    request *req = new_request(&n);
    db_thread_failure_reset();
    run_step(req, answers_created_but_the_database_went_away);
    assert_int_equal(req->status, 503);
    assert_int_equal(req->error, ERR_DATABASE_UNAVAILABLE);
    assert_string_equal(response_header(req, "Retry-After"), "1");
    request_free(req);

    /* a timeout without a key: the node is overloaded, try again */
    req = new_request(&n);
    db_thread_failure_reset();
    run_step(req, answers_created_but_a_statement_timed_out);
    assert_int_equal(req->error, ERR_OVERLOADED);
    request_free(req);
    node_close(&n);
}

static void test_a_timeout_with_a_key_leaves_it_in_doubt_for_the_retry(void **state)
{
    (void)state;
    node n;
    node_open(&n);
    request *req = keyed_request(&n, "k-timeout");
    db_thread_failure_reset();
    run_step(req, answers_created_but_a_statement_timed_out);
    db_thread_failure_reset();
    assert_int_equal(req->status, 503);
    assert_int_equal(req->error, ERR_DATABASE_TIMEOUT);
    char st[16];
    key_state(&n, "k-timeout", st, sizeof st); /* not the 201: the money may have moved */
    assert_string_equal(st, "in_doubt");
    request_free(req);
    node_close(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_steps_answer_stands_and_its_key_is_stored),
        cmocka_unit_test(test_a_database_failure_is_a_503_whatever_the_step_said),
        cmocka_unit_test(test_a_timeout_with_a_key_leaves_it_in_doubt_for_the_retry),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

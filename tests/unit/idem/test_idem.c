/* The idempotency engine (idem/idem.c) against a real SQLite store in a temp file: a claim, its
 * answer settled and replayed, a released key re-claimed, and the fence: a holder whose key was
 * taken over keeps nothing, neither its answer (idem_settle) nor its handler's writes
 * (commit_response_then). Requests run as the recoverer runs them: no runner, so every wait
 * blocks and every step runs on the test's thread. */
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

#include "idem/idem.h"
#include "idem/idem_internal.h"

#include "idem_fixture.h"

static void answer(request *req, int status, const char *body)
{
    reply_raw(req, status, body, strlen(body));
}

static void test_a_fresh_key_is_claimed_and_a_second_request_waits(void **state)
{
    (void)state;
    node n;
    node_open(&n, 60 * 1000);
    request *first = keyed_request(&n, "k-fresh", "{\"amount\":100}");
    assert_true(claim_key(first));
    assert_false(first->idem->resumed);
    assert_true(first->idem->fence > 0);
    assert_int_equal(strlen(first->idem->processor_key), 64);
    key_state k = stored_key_row(&n, "k-fresh");
    assert_string_equal(k.state, "started");
    assert_int_equal(k.fence, first->idem->fence);

    /* the same request while the first holds the key: 409, try again */
    request *second = keyed_request(&n, "k-fresh", "{\"amount\":100}");
    assert_false(claim_key(second));
    assert_int_equal(second->status, 409);
    assert_int_equal(second->error, ERR_REQUEST_IN_PROGRESS);
    assert_null(second->idem); /* nothing of it to settle */

    /* another body under the same key: 422, whoever holds it */
    request *other = keyed_request(&n, "k-fresh", "{\"amount\":999}");
    assert_false(claim_key(other));
    assert_int_equal(other->error, ERR_IDEMPOTENCY_KEY_REUSED);
    request_free(first);
    request_free(second);
    request_free(other);
    node_close(&n);
}

static void test_a_settled_answer_is_replayed(void **state)
{
    (void)state;
    node n;
    node_open(&n, 60 * 1000);
    request *first = keyed_request(&n, "k-settle", "{\"amount\":100}");
    assert_true(claim_key(first));
    answer(first, 201, "{\"id\":\"pay_1\"}");
    idem_settle(first, KEY_STORE);
    assert_int_equal(first->status, 201);
    key_state k = stored_key_row(&n, "k-settle");
    assert_string_equal(k.state, "completed");
    assert_int_equal(k.status, 201);
    assert_string_equal(k.body, "{\"id\":\"pay_1\"}");

    request *retry = keyed_request(&n, "k-settle", "{\"amount\":100}");
    assert_false(claim_key(retry));
    assert_int_equal(retry->status, 201);
    assert_string_equal(retry->resp_body, "{\"id\":\"pay_1\"}");
    assert_string_equal(response_header(retry, "Idempotent-Replayed"), "true");
    request_free(first);
    request_free(retry);
    node_close(&n);
}

/* The holder's record committed, but its session was cut during COMMIT, so it saw a failure
 * and leaves the key in doubt (or releases it). The key was completed under the holder's own
 * fence: reopening it would let a retry record the charge a second time. It stays completed
 * and the holder answers what it holds. */
static void test_a_key_completed_by_a_commit_that_looked_failed_is_not_reopened(void **state)
{
    (void)state;
    key_disposition cleanups[] = {KEY_UNLOCK, KEY_RELEASE};
    for (int i = 0; i < 2; i++) {
        node n;
        node_open(&n, 60 * 1000);
        request *holder = keyed_request(&n, "k-landed", "{\"amount\":100}");
        assert_true(claim_key(holder));
        answer(holder, 201, "{\"id\":\"pay_1\"}");
        idem_settle(holder, KEY_STORE);                             /* the commit that landed */
        answer(holder, 503, "{\"code\":\"database_unavailable\"}"); /* what the holder saw */
        idem_settle(holder, cleanups[i]);
        key_state k = stored_key_row(&n, "k-landed");
        assert_string_equal(k.state, "completed");
        assert_int_equal(k.status, 201);
        assert_int_equal(holder->status, 201);
        assert_string_equal(holder->resp_body, "{\"id\":\"pay_1\"}");
        request_free(holder);
        node_close(&n);
    }
}

static void test_a_released_key_is_claimed_again_for_the_same_operation(void **state)
{
    (void)state;
    node n;
    node_open(&n, 60 * 1000);
    request *first = keyed_request(&n, "k-release", "{\"amount\":100}");
    assert_true(claim_key(first));
    idem_settle(first, KEY_RELEASE);
    assert_string_equal(stored_key_row(&n, "k-release").state, "released");

    request *again = keyed_request(&n, "k-release", "{\"amount\":100}");
    assert_true(claim_key(again));
    assert_true(again->idem->resumed);
    assert_true(again->idem->fence > first->idem->fence);
    /* the same logical operation: the same processor key, so a charge is not made twice */
    assert_int_equal(again->idem->generation, first->idem->generation);
    assert_string_equal(again->idem->processor_key, first->idem->processor_key);
    request_free(first);
    request_free(again);
    node_close(&n);
}

/* A claims; its lock times out; B, a retry of the same request, takes the key over. */
static void take_over(node *n, const char *key, request **a, request **b)
{
    *a = keyed_request(n, key, "{\"amount\":100}");
    assert_true(claim_key(*a));
    usleep(20 * 1000); /* past the 5 ms lock timeout */
    *b = keyed_request(n, key, "{\"amount\":100}");
    assert_true(claim_key(*b));
    assert_true((*b)->idem->resumed);
    assert_true((*b)->idem->fence > (*a)->idem->fence);
    assert_string_equal((*b)->idem->processor_key, (*a)->idem->processor_key);
}

static void test_a_holder_that_lost_its_key_stores_nothing(void **state)
{
    (void)state;
    node n;
    node_open(&n, 5);
    request *a, *b;
    take_over(&n, "k-fenced", &a, &b);

    /* A finishes late: its answer is not stored, and it answers what the key holds */
    answer(a, 201, "{\"id\":\"pay_late\"}");
    idem_settle(a, KEY_STORE);
    key_state k = stored_key_row(&n, "k-fenced");
    assert_string_equal(k.state, "started");
    assert_int_equal(k.fence, b->idem->fence);
    assert_int_equal(k.status, 0);
    assert_int_equal(a->status, 409); /* B holds it (its lock is fresh from A's view, or not) */
    assert_true(a->resp_recorded);    /* nothing of A's may be stored for the key */

    /* A's release or unlock cannot touch B's key either */
    request *a_again = keyed_request(&n, "k-fenced", "{\"amount\":100}");
    a_again->idem->fence = a->idem->fence;
    idem_settle(a_again, KEY_RELEASE);
    assert_string_equal(stored_key_row(&n, "k-fenced").state, "started");

    /* B, the holder, stores its answer, and a retry replays B's */
    answer(b, 201, "{\"id\":\"pay_b\"}");
    idem_settle(b, KEY_STORE);
    k = stored_key_row(&n, "k-fenced");
    assert_string_equal(k.state, "completed");
    assert_string_equal(k.body, "{\"id\":\"pay_b\"}");
    request_free(a);
    request_free(a_again);
    request_free(b);
    node_close(&n);
}

/* A handler's write job that records a row and answers 201, or only records it (a step in the
 * middle of a handler, whose answer comes later: only the fence held first guards it). */
typedef struct record_job {
    request *req;
    const char *name;
    bool answers;
} record_job;

static write_result record_and_answer(db_conn *db, void *arg)
{
    record_job *j = arg;
    if (db_exec(db, "INSERT INTO secrets (name, value) VALUES ($1, 'x')", "s", j->name) != DB_DONE)
        return WRITE_FAILED;
    if (j->answers)
        answer(j->req, 201, "{\"id\":\"pay_commit\"}");
    return WRITE_OK;
}

static step_result note_committed(request *req, void *ctx)
{
    *(int *)ctx = (int)req->write_result;
    return STEP_DONE;
}

static int64_t rows_named(node *n, const char *name)
{
    db_conn *db = store_reader(n->a.store);
    db_stmt *st = db_query(db, "SELECT COUNT(*) FROM secrets WHERE name = $1", "s", name);
    assert_int_equal(db_step(st), DB_ROW);
    int64_t count = db_int(st, 0);
    db_done(st);
    store_release_reader(n->a.store);
    return count;
}

static void test_a_commit_by_a_holder_that_lost_its_key_is_undone(void **state)
{
    (void)state;
    node n;
    node_open(&n, 5);
    request *a, *b;
    take_over(&n, "k-commit", &a, &b);

    /* a middle step of A's (it writes, answers nothing yet), then its final one */
    int outcome = -1;
    record_job step = {a, "late-step", false};
    commit_response_then(a, record_and_answer, &step, note_committed, &outcome);
    assert_int_equal(outcome, WRITE_FENCED);
    assert_int_equal(rows_named(&n, "late-step"), 0); /* its writes went with the job */
    assert_int_equal(a->status, 409);
    reply_forget(a, 0);
    record_job late = {a, "late-holder", true};
    commit_response_then(a, record_and_answer, &late, note_committed, &outcome);
    assert_int_equal(outcome, WRITE_FENCED);
    assert_int_equal(rows_named(&n, "late-holder"), 0);
    assert_int_equal(stored_key_row(&n, "k-commit").status, 0);
    assert_int_equal(a->status, 409);

    /* the holder's commit keeps its writes and its answer in one transaction */
    record_job held = {b, "holder", true};
    commit_response_then(b, record_and_answer, &held, note_committed, &outcome);
    assert_int_equal(outcome, WRITE_OK);
    assert_int_equal(rows_named(&n, "holder"), 1);
    key_state k = stored_key_row(&n, "k-commit");
    assert_string_equal(k.state, "completed");
    assert_string_equal(k.body, "{\"id\":\"pay_commit\"}");
    assert_true(b->resp_recorded);
    request_free(a);
    request_free(b);
    node_close(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_fresh_key_is_claimed_and_a_second_request_waits),
        cmocka_unit_test(test_a_settled_answer_is_replayed),
        cmocka_unit_test(test_a_key_completed_by_a_commit_that_looked_failed_is_not_reopened),
        cmocka_unit_test(test_a_released_key_is_claimed_again_for_the_same_operation),
        cmocka_unit_test(test_a_holder_that_lost_its_key_stores_nothing),
        cmocka_unit_test(test_a_commit_by_a_holder_that_lost_its_key_is_undone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* A takeover that races the key it takes over (idem/idem.c, claim): between the claim's read of
 * the row and its write, the key changes: its holder finishes, leaves it in doubt, or another
 * request takes it over. The write names everything the verdict read, so it changes nothing,
 * and the request answers what the key holds now.
 *
 * On PostgreSQL that window is real (the read locks nothing; tests/chaos/case6_takeover_race.py
 * stops a process in it). Here the engine is compiled in with its fault point in that window
 * replaced by a hook that makes the change on the claim's own connection, inside its
 * transaction, as if another process had committed it just then. */
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

#include "node/fault.h"
#include "store/db.h"

/* what happens in the window, on the claim's connection; NULL: nothing */
static void (*meanwhile)(db_conn *db);

static void in_the_window(db_conn *db, const char *name)
{
    assert_string_equal(name, "claim-between-read-and-write");
    if (meanwhile)
        meanwhile(db);
}

#define fault_point(name) in_the_window(db, name)
#include "idem/idem.c"
#undef fault_point

#include "idem_fixture.h"

#define KEY  "k-race"
#define BODY "{\"amount\":100}"

/* The holder A claims; its lock times out; a retry B reads the key and, in the window,
 * `change` happens. Returns B, claimed or answered; *holder is A. */
static request *race(node *n, void (*change)(db_conn *db), request **holder)
{
    *holder = keyed_request(n, KEY, BODY);
    meanwhile = NULL;
    assert_true(claim_key(*holder));
    usleep(20 * 1000); /* past the 5 ms lock timeout */
    request *retry = keyed_request(n, KEY, BODY);
    meanwhile = change;
    claim_key(retry);
    meanwhile = NULL;
    return retry;
}

/* the holder stores its answer (its fence is unchanged by that: only claims move it) */
static void holder_finishes(db_conn *db)
{
    assert_int_equal(db_exec(db,
                             "UPDATE idempotency_keys SET state = 'completed', locked_at = 0, "
                             "response_status = 201, response_body = '{\"id\":\"pay_a\"}' "
                             "WHERE idem_key = $1",
                             "s", KEY),
                     DB_DONE);
}

static void holder_leaves_it_in_doubt(db_conn *db)
{
    assert_int_equal(db_exec(db,
                             "UPDATE idempotency_keys SET state = 'in_doubt', locked_at = $2 "
                             "WHERE idem_key = $1",
                             "si", KEY, now_us()),
                     DB_DONE);
}

static void another_retry_takes_it(db_conn *db)
{
    assert_int_equal(db_exec(db,
                             "UPDATE idempotency_keys SET fence = fence + 1, locked_at = $2 "
                             "WHERE idem_key = $1",
                             "si", KEY, now_us()),
                     DB_DONE);
}

static void test_a_key_finished_in_the_window_is_replayed_not_reopened(void **state)
{
    (void)state;
    node n;
    node_open(&n, 5);
    request *a, *b = race(&n, holder_finishes, &a);
    /* B took nothing: the completed key stays completed, with A's answer, and B replays it */
    key_state k = stored_key_row(&n, KEY);
    assert_string_equal(k.state, "completed");
    assert_int_equal(k.fence, a->idem->fence);
    assert_int_equal(k.status, 201);
    assert_int_equal(b->status, 201);
    assert_string_equal(b->resp_body, "{\"id\":\"pay_a\"}");
    assert_string_equal(response_header(b, "Idempotent-Replayed"), "true");
    assert_null(b->idem); /* nothing of B's to settle */
    request_free(a);
    request_free(b);
    node_close(&n);
}

static void test_a_key_left_in_doubt_in_the_window_is_not_taken(void **state)
{
    (void)state;
    node n;
    node_open(&n, 5);
    request *a, *b = race(&n, holder_leaves_it_in_doubt, &a);
    key_state k = stored_key_row(&n, KEY);
    assert_string_equal(k.state, "in_doubt");
    assert_int_equal(k.fence, a->idem->fence);
    assert_int_equal(b->status, 409);
    assert_int_equal(b->error, ERR_REQUEST_IN_PROGRESS);
    /* the next retry takes it over as usual */
    request *c = keyed_request(&n, KEY, BODY);
    assert_true(claim_key(c));
    assert_true(c->idem->resumed);
    assert_true(c->idem->fence > a->idem->fence);
    request_free(a);
    request_free(b);
    request_free(c);
    node_close(&n);
}

static void test_a_key_taken_over_in_the_window_has_one_taker(void **state)
{
    (void)state;
    node n;
    node_open(&n, 5);
    request *a, *b = race(&n, another_retry_takes_it, &a);
    key_state k = stored_key_row(&n, KEY);
    assert_string_equal(k.state, "started");
    assert_int_equal(k.fence, a->idem->fence + 1); /* the other taker's, not B's */
    assert_int_equal(b->status, 409);
    assert_int_equal(b->error, ERR_REQUEST_IN_PROGRESS);
    request_free(a);
    request_free(b);
    node_close(&n);
}

static void test_an_untouched_key_is_taken_over(void **state)
{
    (void)state;
    node n;
    node_open(&n, 5);
    request *a, *b = race(&n, NULL, &a);
    assert_int_equal(b->status, 0);
    assert_true(b->idem->resumed);
    key_state k = stored_key_row(&n, KEY);
    assert_string_equal(k.state, "started");
    assert_int_equal(k.fence, b->idem->fence);
    request_free(a);
    request_free(b);
    node_close(&n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_key_finished_in_the_window_is_replayed_not_reopened),
        cmocka_unit_test(test_a_key_left_in_doubt_in_the_window_is_not_taken),
        cmocka_unit_test(test_a_key_taken_over_in_the_window_has_one_taker),
        cmocka_unit_test(test_an_untouched_key_is_taken_over),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

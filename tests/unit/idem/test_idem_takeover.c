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

#define USER 7
#define KEY  "k-race"
#define BODY "{\"amount\":100}"

typedef struct node {
    char path[64];
    app a;
} node;

static void node_open(node *n)
{
    snprintf(n->path, sizeof n->path, "/tmp/payd-idem-race-XXXXXX");
    close(mkstemp(n->path));
    char err[256];
    store_options opt = {.url = n->path, .max_batch = 64};
    n->a = (app){.store = store_open(&opt, err, sizeof err), .metrics = metrics_create()};
    assert_non_null(n->a.store);
    n->a.cfg.idempotency_ttl_ms = 24 * 3600 * 1000;
    n->a.cfg.idempotency_lock_timeout_ms = 5;
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

static request *keyed_request(node *n)
{
    request *req = calloc(1, sizeof *req);
    arena_init(&req->arena);
    req->app = &n->a;
    req->method = "POST";
    req->path = "/v1/payments";
    req->user.id = USER;
    req->authenticated = true;
    snprintf(req->request_id, sizeof req->request_id, "req_race");
    req->idem = arena_alloc(&req->arena, sizeof *req->idem);
    snprintf(req->idem->key, sizeof req->idem->key, "%s", KEY);
    req->idem->canonical_body = strdup(BODY);
    request_fingerprint(req->method, req->path, BODY, req->idem->fingerprint);
    return req;
}

static step_result note_claimed(request *req, void *ctx)
{
    (void)req;
    *(bool *)ctx = true;
    return STEP_DONE;
}

static bool claim_key(request *req)
{
    bool claimed = false;
    assert_int_equal(idem_claim_then(req, note_claimed, &claimed), STEP_DONE);
    assert_true(claimed == (req->status == 0));
    return claimed;
}

typedef struct key_state {
    char state[16];
    int64_t fence;
    int status;
} key_state;

static key_state key_now(node *n)
{
    key_state k;
    memset(&k, 0, sizeof k);
    db_conn *db = store_reader(n->a.store);
    db_stmt *st = db_query(db,
                           "SELECT state, fence, response_status FROM idempotency_keys "
                           "WHERE user_id = $1 AND idem_key = $2",
                           "is", (int64_t)USER, KEY);
    assert_int_equal(db_step(st), DB_ROW);
    snprintf(k.state, sizeof k.state, "%s", db_text(st, 0));
    k.fence = db_int(st, 1);
    k.status = (int)db_int(st, 2);
    db_done(st);
    store_release_reader(n->a.store);
    return k;
}

/* The holder A claims; its lock times out; a retry B reads the key and, in the window,
 * `change` happens. Returns B, claimed or answered; *holder is A. */
static request *race(node *n, void (*change)(db_conn *db), request **holder)
{
    *holder = keyed_request(n);
    meanwhile = NULL;
    assert_true(claim_key(*holder));
    usleep(20 * 1000); /* past the 5 ms lock timeout */
    request *retry = keyed_request(n);
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
    node_open(&n);
    request *a, *b = race(&n, holder_finishes, &a);
    /* B took nothing: the completed key stays completed, with A's answer, and B replays it */
    key_state k = key_now(&n);
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
    node_open(&n);
    request *a, *b = race(&n, holder_leaves_it_in_doubt, &a);
    key_state k = key_now(&n);
    assert_string_equal(k.state, "in_doubt");
    assert_int_equal(k.fence, a->idem->fence);
    assert_int_equal(b->status, 409);
    assert_int_equal(b->error, ERR_REQUEST_IN_PROGRESS);
    /* the next retry takes it over as usual */
    request *c = keyed_request(&n);
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
    node_open(&n);
    request *a, *b = race(&n, another_retry_takes_it, &a);
    key_state k = key_now(&n);
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
    node_open(&n);
    request *a, *b = race(&n, NULL, &a);
    assert_int_equal(b->status, 0);
    assert_true(b->idem->resumed);
    key_state k = key_now(&n);
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

/* What the idempotency engine's tests share: a node of their own (a real SQLite store in a temp
 * file and the settings the engine reads), a keyed POST as the precheck leaves it, a claim, and
 * the key's stored row. Included after idem/idem.c or its headers; the functions are static
 * inline so a test that uses a few of them compiles without warnings. */
#ifndef PAYD_TESTS_IDEM_FIXTURE_H
#define PAYD_TESTS_IDEM_FIXTURE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/canonical.h"
#include "node/app.h"
#include "node/metrics.h"
#include "store/db.h"
#include "store/store.h"

#define USER 7

typedef struct node {
    char path[64];
    app a;
} node;

static inline void node_open(node *n, int64_t lock_timeout_ms)
{
    snprintf(n->path, sizeof n->path, "/tmp/payd-idem-test-XXXXXX");
    close(mkstemp(n->path));
    char err[256];
    store_options opt = {.url = n->path, .max_batch = 64};
    n->a = (app){.store = store_open(&opt, err, sizeof err), .metrics = metrics_create()};
    assert_non_null(n->a.store);
    n->a.cfg.idempotency_ttl_ms = 24 * 3600 * 1000;
    n->a.cfg.idempotency_lock_timeout_ms = lock_timeout_ms;
}

static inline void node_close(node *n)
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

/* A POST carrying key, with body, as the precheck leaves it: the key parsed, the body's
 * fingerprint taken, nothing claimed yet. */
static inline request *keyed_request(node *n, const char *key, const char *body)
{
    request *req = calloc(1, sizeof *req);
    arena_init(&req->arena);
    req->app = &n->a;
    req->method = "POST";
    req->path = "/v1/payments";
    req->user.id = USER;
    req->authenticated = true;
    snprintf(req->request_id, sizeof req->request_id, "req_%s", key);
    req->idem = arena_alloc(&req->arena, sizeof *req->idem);
    snprintf(req->idem->key, sizeof req->idem->key, "%s", key);
    req->idem->canonical_body = strdup(body);
    request_fingerprint(req->method, req->path, body, req->idem->fingerprint);
    return req;
}

static inline step_result note_claimed(request *req, void *ctx)
{
    (void)req;
    *(bool *)ctx = true;
    return STEP_DONE;
}

/* Claims req's key; true when req holds it (the next step ran), false when it was answered. */
static inline bool claim_key(request *req)
{
    bool claimed = false;
    assert_int_equal(idem_claim_then(req, note_claimed, &claimed), STEP_DONE);
    assert_true(claimed == (req->status == 0));
    return claimed;
}

typedef struct key_state {
    char state[16];
    int64_t fence, generation;
    int status;
    char body[128];
} key_state;

static inline key_state stored_key_row(node *n, const char *key)
{
    key_state k;
    memset(&k, 0, sizeof k);
    db_conn *db = store_reader(n->a.store);
    db_stmt *st = db_query(db,
                           "SELECT state, fence, generation, response_status, response_body "
                           "FROM idempotency_keys WHERE user_id = $1 AND idem_key = $2",
                           "is", (int64_t)USER, key);
    assert_int_equal(db_step(st), DB_ROW);
    snprintf(k.state, sizeof k.state, "%s", db_text(st, 0));
    k.fence = db_int(st, 1);
    k.generation = db_int(st, 2);
    k.status = (int)db_int(st, 3);
    snprintf(k.body, sizeof k.body, "%s", db_text(st, 4) ? db_text(st, 4) : "");
    db_done(st);
    store_release_reader(n->a.store);
    return k;
}

#endif

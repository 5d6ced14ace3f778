/* The recoverer, one background thread.
 *
 * Recoverer: a key still `started` past the lock timeout (its server died mid-request), or left
 * `in_doubt` by a processor timeout for longer than the lock timeout with no client retry, is
 * taken over exactly as a retry would take it (the same atomic claim) and handed to its route's
 * recover step, which asks the processor what happened instead of acting again. Routes without
 * a processor call commit their effects together with the key's answer, so an unfinished key of
 * theirs means nothing happened: it is released.
 *
 * Voider: works through charge_voids, the charges a request made but could not record (it lost
 * its key to a newer holder, or its order went to another payment). A charge the key's
 * current holder will record (same generation and request: the processor hands that holder the
 * same charge) is left to it; one a payment carries is done; any other is refunded by its
 * processor key, retried every pass until the processor confirms, so none stays orphaned.
 *
 * Expired keys are deleted by the pruner (store/prune.c), which never touches an open key: the
 * recoverer finishes it first.
 *
 * A pass waits at most one processor timeout in all on calls that get no answer, then stops
 * asking: with the processor down, each of the keys and voids after it would wait out the
 * timeout for the same outage (100 keys at 10 s, and a SIGTERM waiting for all of them). A
 * lost answer that comes back at once (a 500) costs nothing, and the pass goes on. What it
 * leaves stays as it was, for the next pass. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/canonical.h"
#include "core/ids.h"
#include "core/log.h"
#include "core/timefmt.h"
#include "idem/idem_internal.h"
#include "node/app.h"
#include "node/fault.h"
#include "processor/processor.h"
#include "request/input.h"

#define RECOVER_PER_PASS 100

static pthread_t recovery_thread;
static bool recovery_running;
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static atomic_bool stopping;
static idem_recovery_hooks recovery_hooks; /* the thread's, from idem_recovery_start */

typedef struct open_key {
    int64_t user_id, owner; /* owner: the live user, user_id's own id unless a test twin */
    bool test;              /* the key is a test key's (docs/modes.md) */
    char *key, *fingerprint, *method, *path, *body;
} open_key;

/* One line per key the recoverer settles: whose, which (a hash: the key itself is the client's),
 * and how it ended. The line's time says when. */
static void log_settled_key(request *req, const open_key *k)
{
    char user[ID_STR_MAX], key_hash[65];
    bool recovered = req->route->recover && req->json;
    id_format((uint64_t)k->owner, "usr", user); /* the user, never its test twin */
    sha256_hex(k->key, strlen(k->key), key_hash);
    jsonw w;
    log_begin(&w, req->status >= 500 ? "warn" : "info", "recovered idempotency key");
    jw_key(&w, "user_id");
    jw_string(&w, user);
    jw_key(&w, "livemode");
    jw_bool(&w, !k->test);
    jw_key(&w, "key_sha256");
    jw_string(&w, key_hash);
    jw_key(&w, "route");
    jw_string(&w, req->route->name);
    jw_key(&w, "status");
    jw_int(&w, req->status);
    jw_key(&w, "outcome"); /* completed, released, or the problem code it settled with */
    jw_string(&w, !recovered          ? "released"
                  : req->status < 400 ? "completed"
                                      : problem_lookup(req->error)->code);
    log_end(&w);
}

/* What one pass has waited on processor calls that got no answer, and how long it may. */
typedef struct pass_budget {
    int64_t unanswered_ns, limit_ns;
} pass_budget;

/* Counts a call that started at started_ns; true while the pass may go on asking. */
static bool still_asking(pass_budget *b, bool answered, int64_t started_ns)
{
    if (!answered)
        b->unanswered_ns += monotonic_ns() - started_ns;
    return b->unanswered_ns < b->limit_ns && !atomic_load(&stopping);
}

/* A key the recoverer settles, and how to run its handler step. */
typedef struct recovering {
    const idem_recovery_hooks *h;
    const open_key *k;
} recovering;

/* Runs once the recoverer holds the key: finish what the request started, or release it. */
static step_result settle_claimed(request *req, void *arg)
{
    recovering *r = arg;
    /* the body passed the route's schema before the key was claimed; one an older release
     * took that this one refuses is released like any refused request */
    if (req->route->recover && req->json && route_input_or_reply(req))
        r->h->run_step(req, req->route->recover);
    else
        idem_settle(req, KEY_RELEASE);
    log_settled_key(req, r->k);
    return STEP_DONE;
}

/* Settles one key; false while the pass may not go on asking the processor. */
static bool recover_one(app *a, const idem_recovery_hooks *h, const open_key *k, pass_budget *b)
{
    request *req = calloc(1, sizeof *req);
    arena_init(&req->arena);
    req->app = a;
    req->method = arena_strdup(&req->arena, k->method);
    req->path = arena_strdup(&req->arena, k->path);
    req->user.id = (uint64_t)k->user_id;
    req->user.owner = (uint64_t)k->owner;
    req->user.test = k->test; /* so it resumes on the processor of its mode */
    req->authenticated = true;
    /* named by a prefix of the key's hash, never the key itself (the client's secret-ish
     * token): the same as log_settled_key's key_sha256, so the lines can be joined */
    char key_hash[65];
    sha256_hex(k->key, strlen(k->key), key_hash);
    snprintf(req->request_id, sizeof req->request_id, "recovery_%.24s", key_hash);
    req->start_ns = monotonic_ns();
    char allow[64];
    if (route_match(h->routes, h->route_count, req->method, req->path, &req->arena, &req->route,
                    req->params, allow, sizeof allow) != ROUTE_MATCHED) {
        request_free(req);
        return still_asking(b, true, 0);
    }
    req->json = json_loads(k->body ? k->body : "{}", 0, NULL);
    req->idem = arena_alloc(&req->arena, sizeof *req->idem);
    snprintf(req->idem->key, sizeof req->idem->key, "%s", k->key);
    snprintf(req->idem->fingerprint, sizeof req->idem->fingerprint, "%s", k->fingerprint);
    req->idem->canonical_body = k->body ? strdup(k->body) : NULL;

    /* this key's database failures only: a failed read must leave the key in doubt for the
     * next pass, never release it as if the row were missing */
    db_thread_failure_reset();
    recovering r = {h, k};
    int64_t req_started_ns = monotonic_ns();
    idem_claim_then(req, settle_claimed, &r); /* no runner: every step runs here */
    bool answered = req->error != ERR_PROCESSOR_UNAVAILABLE;
    request_free(req);
    return still_asking(b, answered, req_started_ns);
}

/* ---- the voider ---- */

typedef struct charge_void {
    int64_t user_id, generation, amount, account_id;
    bool test; /* made by a test key: the builtin simulator's charge */
    char processor_key[65], idem_key[256], fingerprint[65], charge_id[64];
} charge_void;

typedef enum { VOID_WAIT, VOID_CARRIED, VOID_NOW } void_verdict;

typedef struct void_decision {
    const charge_void *v;
    int64_t now;
    void_verdict verdict;
} void_decision;

/* One write job, so the verdict and the key's state cannot drift apart: a released key whose
 * charge is about to be voided is moved to a new generation here, so a re-claim of it asks the
 * processor under a new processor key and can never be handed the charge being refunded.
 * The key is read before the payments: on PostgreSQL each statement sees what had committed when
 * it began, and a payment commits with its key's answer, so a key seen completed has its
 * payment seen by the read after it (read the other way round, a payment committed between the
 * two reads was missed, and its charge voided). */
static write_result decide_void(db_conn *db, void *arg)
{
    void_decision *d = arg;
    const charge_void *v = d->v;
    db_stmt *st = db_query(db,
                           "SELECT state, fence FROM idempotency_keys WHERE user_id = $1 AND "
                           "idem_key = $2 AND generation = $3 AND fingerprint = $4",
                           "isis", v->user_id, v->idem_key, v->generation, v->fingerprint);
    char state[16] = "";
    int64_t fence = 0;
    db_status rc = db_step(st);
    if (rc == DB_ROW) {
        snprintf(state, sizeof state, "%s", db_text(st, 0));
        fence = db_int(st, 1);
    }
    db_done(st);
    if (rc < 0)
        return write_result_of_db(rc);
    if (!strcmp(state, "started") || !strcmp(state, "in_doubt")) {
        d->verdict = VOID_WAIT; /* its holder (or the recoverer) will record this charge */
        return WRITE_OK;
    }
    fault_point("void-between-reads"); /* a retry's payment may commit here */
    /* the account's payments since the key's generation (less a minute for clocks that differ
     * between nodes): one range of the payments_page index, not a scan of every payment */
    st = db_query(db,
                  "SELECT 1 FROM payments WHERE account_id = $1 AND created_at >= $2 "
                  "AND processor_charge_id = $3",
                  "iis", v->account_id, v->generation - 60 * 1000000LL, v->charge_id);
    rc = db_step(st);
    bool carried = rc == DB_ROW;
    db_done(st);
    if (rc < 0)
        return write_result_of_db(rc); /* could not look: never a verdict to void on */
    if (carried) {
        d->verdict = VOID_CARRIED;
        return WRITE_OK;
    }
    d->verdict = VOID_NOW;
    if (!strcmp(state, "released")) {
        rc = db_exec(db,
                     "UPDATE idempotency_keys SET generation = $3, fence = $4 "
                     "WHERE user_id = $1 AND idem_key = $2 AND fence = $5",
                     "isiii", v->user_id, v->idem_key, d->now,
                     fence + 1 > d->now ? fence + 1 : d->now, fence);
        if (rc != DB_DONE)
            return write_result_of_db(rc);
        if (db_changes(db) != 1)
            d->verdict = VOID_WAIT; /* claimed meanwhile: look again next pass */
    }
    return WRITE_OK;
}

static write_result forget_void(db_conn *db, void *arg)
{
    const charge_void *v = arg;
    return write_result_of_db(
        db_exec(db, "DELETE FROM charge_voids WHERE processor_key = $1", "s", v->processor_key));
}

/* Settles one charge no payment carries; false while the pass may not go on asking the
 * processor. */
static bool settle_void(app *a, const charge_void *v, pass_budget *b)
{
    void_decision d = {.v = v, .now = now_us()};
    if (store_write(a->store, decide_void, &d) != WRITE_OK || d.verdict == VOID_WAIT)
        return still_asking(b, true, 0);
    const char *outcome = "carried";
    if (d.verdict == VOID_NOW) {
        char void_key[80];
        snprintf(void_key, sizeof void_key, "%s:void", v->processor_key);
        int64_t started_ns = monotonic_ns();
        /* a hold (docs/api.md §17) is released, never refunded: nothing of it was taken */
        processor *proc = processor_of_mode(a, v->test);
        proc_hold hold = processor_hold(proc, v->charge_id);
        proc_result r = hold.status == PROC_APPROVED && hold.authorized
                            ? processor_release(proc, void_key, v->charge_id, v->amount)
                            : processor_refund(proc, void_key, v->charge_id, v->amount);
        if (r.status != PROC_APPROVED) {
            jsonw w;
            log_begin(&w, "warn", "void not confirmed; retried next pass");
            jw_key(&w, "charge_id");
            jw_string(&w, v->charge_id);
            log_end(&w);
            return still_asking(b, r.status != PROC_UNAVAILABLE, started_ns);
        }
        outcome = "voided";
    }
    store_write(a->store, forget_void, (void *)v);
    jsonw w;
    log_begin(&w, "info", "unrecorded charge settled");
    jw_key(&w, "user_id");
    jw_int(&w, v->user_id);
    jw_key(&w, "charge_id");
    jw_string(&w, v->charge_id);
    jw_key(&w, "outcome");
    jw_string(&w, outcome);
    log_end(&w);
    return still_asking(b, true, 0);
}

/* One line when a pass leaves work for the next because the processor did not answer (none
 * when it stops for a shutdown). */
static void log_pass_stopped(const char *what, int left)
{
    if (atomic_load(&stopping))
        return;
    jsonw w;
    log_begin(&w, "warn", "recovery pass stopped: the processor did not answer");
    jw_key(&w, what);
    jw_int(&w, left);
    log_end(&w);
}

static void void_pass(app *a, pass_budget *b)
{
    /* a reader of its own: the one the key scan used went back to the pool, and another
     * thread may be using it now (two threads on one connection read each other's results) */
    db_conn *db = store_reader(a->store);
    if (!db)
        return;
    charge_void voids[RECOVER_PER_PASS];
    int n = 0;
    db_stmt *st = db_query(db,
                           "SELECT processor_key, user_id, idem_key, fingerprint, generation, "
                           "charge_id, amount, account_id, (SELECT mode FROM users u "
                           "WHERE u.id = charge_voids.user_id) FROM charge_voids "
                           "ORDER BY created_at LIMIT 100",
                           "");
    while (n < RECOVER_PER_PASS && db_step(st) == DB_ROW) {
        charge_void *v = &voids[n++];
        snprintf(v->processor_key, sizeof v->processor_key, "%s", db_text(st, 0));
        v->user_id = db_int(st, 1);
        v->test = db_text(st, 8) && !strcmp(db_text(st, 8), "test");
        snprintf(v->idem_key, sizeof v->idem_key, "%s", db_text(st, 2));
        snprintf(v->fingerprint, sizeof v->fingerprint, "%s", db_text(st, 3));
        v->generation = db_int(st, 4);
        snprintf(v->charge_id, sizeof v->charge_id, "%s", db_text(st, 5));
        v->amount = db_int(st, 6);
        v->account_id = db_int(st, 7);
    }
    db_done(st);
    store_thread_done(a->store); /* settle_void writes; the reader is not held across it */
    for (int i = 0; i < n; i++) {
        if (!settle_void(a, &voids[i], b)) {
            log_pass_stopped("voids_left", n - i - 1);
            break;
        }
    }
}

/* The keys left open past the lock timeout, at most RECOVER_PER_PASS of them, then the
 * charges no payment carries. */
static void recover_open_keys(app *a, const idem_recovery_hooks *h, int64_t now)
{
    db_conn *db = store_reader(a->store);
    if (!db)
        return;
    open_key keys[RECOVER_PER_PASS];
    int n = 0;
    db_stmt *st = db_query(db,
                           "SELECT k.user_id, k.idem_key, k.fingerprint, k.method, k.path, "
                           "k.request_body, u.mode, COALESCE(u.live_user_id, u.id) "
                           "FROM idempotency_keys k LEFT JOIN users u ON u.id = k.user_id "
                           "WHERE k.state IN ('started', 'in_doubt') "
                           "AND k.locked_at < $1 LIMIT 100",
                           "i", now - a->cfg.idempotency_lock_timeout_ms * 1000);
    while (n < RECOVER_PER_PASS && db_step(st) == DB_ROW) {
        keys[n].user_id = db_int(st, 0);
        keys[n].test = db_text(st, 6) && !strcmp(db_text(st, 6), "test");
        keys[n].owner = db_is_null(st, 7) ? keys[n].user_id : db_int(st, 7);
        keys[n].key = strdup(db_text(st, 1));
        keys[n].fingerprint = strdup(db_text(st, 2));
        keys[n].method = strdup(db_text(st, 3));
        keys[n].path = strdup(db_text(st, 4));
        keys[n].body = db_text(st, 5) ? strdup(db_text(st, 5)) : NULL;
        n++;
    }
    db_done(st);
    store_thread_done(a->store); /* the reader goes back to the pool between passes */
    pass_budget budget = {.limit_ns = a->cfg.processor_timeout_ms * 1000000};
    bool asking = true;
    for (int i = 0; i < n; i++) {
        if (asking && !recover_one(a, h, &keys[i], &budget)) {
            log_pass_stopped("keys_left", n - i - 1);
            asking = false;
        }
        store_thread_done(a->store);
        free(keys[i].key);
        free(keys[i].fingerprint);
        free(keys[i].method);
        free(keys[i].path);
        free(keys[i].body);
    }
    if (asking)
        void_pass(a, &budget); /* after the keys: a key just recovered may now carry its charge */
}

void idem_recovery_pass(app *a, const idem_recovery_hooks *h)
{
    recover_open_keys(a, h, now_us());
    if (h->periodic && !atomic_load(&stopping))
        h->periodic(a);
}

static void *recovery_main(void *arg)
{
    app *a = arg;
    pthread_mutex_lock(&sleep_lock);
    while (!stopping) {
        pthread_mutex_unlock(&sleep_lock);
        idem_recovery_pass(a, &recovery_hooks);
        pthread_mutex_lock(&sleep_lock);
        if (stopping)
            break;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        int64_t ns = until.tv_nsec + a->cfg.recovery_interval_ms * 1000000;
        until.tv_sec += ns / 1000000000;
        until.tv_nsec = ns % 1000000000;
        pthread_cond_timedwait(&wake, &sleep_lock, &until);
    }
    pthread_mutex_unlock(&sleep_lock);
    store_release_reader(a->store);
    return NULL;
}

void idem_recovery_start(app *a, const idem_recovery_hooks *hooks)
{
    recovery_hooks = *hooks;
    stopping = false;
    recovery_running = pthread_create(&recovery_thread, NULL, recovery_main, a) == 0;
}

void idem_recovery_stop(void)
{
    if (!recovery_running)
        return;
    pthread_mutex_lock(&sleep_lock);
    stopping = true;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&sleep_lock);
    pthread_join(recovery_thread, NULL);
    recovery_running = false;
}

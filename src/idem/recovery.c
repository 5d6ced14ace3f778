/* The recoverer and the sweeper, one background thread.
 *
 * Recoverer: a key still `started` past the lock timeout (its server died mid-request), or left
 * `in_doubt` by a processor timeout for longer than the lock timeout with no client retry, is
 * taken over exactly as a retry would take it (the same atomic claim) and handed to its route's
 * recover step, which asks the processor what happened instead of acting again. Routes without
 * a processor call commit their effects together with the key's answer, so an unfinished key of
 * theirs means nothing happened: it is released.
 *
 * Sweeper: deletes finished keys older than the TTL (lookups already ignore them). Keys still
 * open are never swept: the recoverer finishes them first. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timefmt.h"
#include "http/route.h"
#include "http/server.h"
#include "idem/idem_internal.h"
#include "server/app.h"

#define RECOVER_PER_PASS 100
#define SWEEP_CHUNK      5000

static pthread_t recovery_thread;
static bool recovery_running;
static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static bool stopping;

typedef struct sweep_job {
    int64_t expired_before;
    int64_t deleted;
} sweep_job;

static int sweep(db_conn *db, void *arg)
{
    sweep_job *j = arg;
    db_status rc =
        db_exec(db,
                "DELETE FROM idempotency_keys WHERE (user_id, idem_key) IN ("
                "SELECT user_id, idem_key FROM idempotency_keys "
                "WHERE claimed_at < $1 AND state = 'completed' LIMIT 5000)", /* SWEEP_CHUNK */
                "i", j->expired_before);
    j->deleted = db_changes(db);
    return rc == DB_DONE ? 0 : -1;
}

typedef struct open_key {
    int64_t user_id;
    char *key, *fingerprint, *method, *path, *body;
} open_key;

static void recover_one(app *a, const open_key *k)
{
    request *req = calloc(1, sizeof *req);
    arena_init(&req->arena);
    req->app = a;
    req->method = arena_strdup(&req->arena, k->method);
    req->path = arena_strdup(&req->arena, k->path);
    req->user.id = (uint64_t)k->user_id;
    req->authenticated = true;
    snprintf(req->request_id, sizeof req->request_id, "recovery_%s", k->key);
    req->start_ns = monotonic_ns();
    char allow[64];
    if (route_match(req->method, req->path, &req->arena, &req->route, req->params, allow,
                    sizeof allow) != ROUTE_MATCHED) {
        request_free(req);
        return;
    }
    req->json = json_loads(k->body ? k->body : "{}", 0, NULL);
    req->idem = arena_alloc(&req->arena, sizeof *req->idem);
    snprintf(req->idem->key, sizeof req->idem->key, "%s", k->key);
    snprintf(req->idem->fingerprint, sizeof req->idem->fingerprint, "%s", k->fingerprint);
    req->idem->canonical_body = k->body ? strdup(k->body) : NULL;

    if (idem_claim_or_reply(req)) {
        if (req->route->recover && req->json) {
            req->route->recover(req);
            idem_finish(req);
        } else {
            idem_settle(req, KEY_RELEASE);
        }
        fprintf(stderr,
                "{\"level\":\"info\",\"msg\":\"recovered idempotency key\",\"route\":\"%s\","
                "\"status\":%d}\n",
                req->route->name, req->status);
    }
    request_free(req);
}

void idem_recovery_pass(app *a)
{
    int64_t now = now_us();
    /* in chunks, so one pass never holds the writer long, until a chunk comes back short */
    sweep_job sj = {.expired_before = now - a->cfg.idempotency_ttl_ms * 1000};
    do
        sj.deleted = 0;
    while (store_write(a->store, sweep, &sj) == 0 && sj.deleted == SWEEP_CHUNK);

    db_conn *db = store_reader(a->store);
    if (!db)
        return;
    open_key keys[RECOVER_PER_PASS];
    int n = 0;
    db_stmt *st = db_query(db,
                           "SELECT user_id, idem_key, fingerprint, method, path, request_body "
                           "FROM idempotency_keys WHERE state IN ('started', 'in_doubt') "
                           "AND locked_at < $1 LIMIT 100",
                           "i", now - a->cfg.idempotency_lock_timeout_ms * 1000);
    while (n < RECOVER_PER_PASS && db_step(st) == DB_ROW) {
        keys[n].user_id = db_int(st, 0);
        keys[n].key = strdup(db_text(st, 1));
        keys[n].fingerprint = strdup(db_text(st, 2));
        keys[n].method = strdup(db_text(st, 3));
        keys[n].path = strdup(db_text(st, 4));
        keys[n].body = db_text(st, 5) ? strdup(db_text(st, 5)) : NULL;
        n++;
    }
    db_done(st);
    store_thread_done(a->store); /* the reader goes back to the pool between passes */
    for (int i = 0; i < n; i++) {
        recover_one(a, &keys[i]);
        store_thread_done(a->store);
        free(keys[i].key);
        free(keys[i].fingerprint);
        free(keys[i].method);
        free(keys[i].path);
        free(keys[i].body);
    }
}

static void *recovery_main(void *arg)
{
    app *a = arg;
    pthread_mutex_lock(&sleep_lock);
    while (!stopping) {
        pthread_mutex_unlock(&sleep_lock);
        idem_recovery_pass(a);
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

void idem_recovery_start(app *a)
{
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

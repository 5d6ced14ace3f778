#include "idem/idem.h"
#include "idem/idem_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/canonical.h"
#include "core/idem_key.h"
#include "core/timefmt.h"
#include "http/route.h"
#include "server/app.h"
#include "server/metrics.h"

/* ---- the stored record and what it means for a new request ---- */

typedef struct key_row {
    char fingerprint[65];
    char state[16];
    int64_t claimed_at, locked_at;
    int status;
    char *location, *body; /* malloc'd */
} key_row;

typedef enum {
    KEY_ABSENT,    /* never claimed, or a finished key past its TTL */
    KEY_REPLAY,    /* finished: replay the stored answer */
    KEY_MISMATCH,  /* claimed for another request */
    KEY_BUSY,      /* in flight and locked */
    KEY_RESUMABLE, /* in doubt, or its lock expired: a retry takes it over and resumes */
} key_verdict;

static key_verdict judge(const key_row *row, const char *fingerprint, const app *a, int64_t now)
{
    if (!strcmp(row->state, "completed") &&
        row->claimed_at < now - a->cfg.idempotency_ttl_ms * 1000)
        return KEY_ABSENT;
    if (strcmp(row->fingerprint, fingerprint) != 0)
        return KEY_MISMATCH;
    if (!strcmp(row->state, "completed"))
        return KEY_REPLAY;
    if (!strcmp(row->state, "started") &&
        row->locked_at > now - a->cfg.idempotency_lock_timeout_ms * 1000)
        return KEY_BUSY;
    return KEY_RESUMABLE;
}

static void row_free(key_row *r)
{
    free(r->location);
    free(r->body);
    r->location = r->body = NULL;
}

static bool load_row(db_conn *db, uint64_t user, const char *key, key_row *out)
{
    db_stmt *st = db_query(db,
                           "SELECT fingerprint, state, claimed_at, locked_at, response_status, "
                           "response_location, response_body FROM idempotency_keys "
                           "WHERE user_id = $1 AND idem_key = $2",
                           "is", (int64_t)user, key);
    bool found = db_step(st) == DB_ROW;
    if (found) {
        snprintf(out->fingerprint, sizeof out->fingerprint, "%s", db_text(st, 0));
        snprintf(out->state, sizeof out->state, "%s", db_text(st, 1));
        out->claimed_at = db_int(st, 2);
        out->locked_at = db_int(st, 3);
        out->status = (int)db_int(st, 4);
        out->location = db_text(st, 5) ? strdup(db_text(st, 5)) : NULL;
        out->body = db_text(st, 6) ? strdup(db_text(st, 6)) : NULL;
    }
    db_done(st);
    return found;
}

static void replay(request *req, const key_row *row)
{
    reply_raw(req, row->status, row->body ? row->body : "", row->body ? strlen(row->body) : 0);
    if (row->location)
        reply_header(req, "Location", row->location);
    reply_header(req, "Idempotent-Replayed", "true");
    metrics_count_replay(req->app->metrics);
}

static void answer_verdict(request *req, key_verdict v, const key_row *row)
{
    switch (v) {
    case KEY_REPLAY:
        replay(req, row);
        break;
    case KEY_MISMATCH:
        metrics_count_idem_conflict(req->app->metrics, "idempotency_key_reused");
        reply_error(req, ERR_IDEMPOTENCY_KEY_REUSED,
                    "this Idempotency-Key was used with a different request");
        break;
    case KEY_BUSY:
        metrics_count_idem_conflict(req->app->metrics, "request_in_progress");
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_REQUEST_IN_PROGRESS,
                    "a request with this Idempotency-Key is still running; retry shortly");
        break;
    default:
        break;
    }
}

static void derive_processor_key(request *req)
{
    char material[512];
    int n = snprintf(material, sizeof material, "%llu\n%s\n%lld", (unsigned long long)req->user.id,
                     req->idem->key, (long long)req->idem->claimed_at);
    sha256_hex(material, (size_t)n, req->idem->processor_key);
}

/* ---- precheck: HTTP thread, one indexed read ---- */

idem_precheck_result idem_precheck(request *req)
{
    const char *header = request_header(req, "Idempotency-Key");
    if (!header) {
        if (req->route->flags & ROUTE_IDEM_REQUIRED) {
            reply_error(req, ERR_IDEMPOTENCY_KEY_MISSING, "send an Idempotency-Key header");
            return IDEM_ANSWERED;
        }
        return IDEM_NOT_USED;
    }
    idem_claim *c = arena_alloc(&req->arena, sizeof *c);
    if (idem_parse_key(header, c->key) != 0) {
        reply_error(req, ERR_IDEMPOTENCY_KEY_INVALID,
                    "an Idempotency-Key is 1-255 visible ASCII characters");
        return IDEM_ANSWERED;
    }
    c->canonical_body = json_canonical(req->json);
    request_fingerprint(req->method, req->path, c->canonical_body, c->fingerprint);
    req->idem = c;

    db_conn *db = store_reader(req->app->store);
    key_row row = {0};
    if (db && load_row(db, req->user.id, c->key, &row)) {
        key_verdict v = judge(&row, c->fingerprint, req->app, now_us());
        answer_verdict(req, v, &row);
        row_free(&row);
        if (v == KEY_REPLAY || v == KEY_MISMATCH || v == KEY_BUSY) {
            free(c->canonical_body);
            req->idem = NULL;
            return IDEM_ANSWERED;
        }
    }
    return IDEM_CLAIM_NEEDED;
}

/* ---- claim: one write job, atomic on the primary key ---- */

typedef struct claim_job {
    request *req;
    int64_t now;
    key_verdict verdict; /* KEY_ABSENT here means "claimed" */
    key_row row;
} claim_job;

static int claim(db_conn *db, void *arg)
{
    claim_job *j = arg;
    request *req = j->req;
    idem_claim *c = req->idem;
    int64_t user = (int64_t)req->user.id;
    db_status rc = db_exec(db,
                           "INSERT INTO idempotency_keys (user_id, idem_key, fingerprint, method, "
                           "path, request_body, state, claimed_at, locked_at) "
                           "VALUES ($1, $2, $3, $4, $5, $6, 'started', $7, $7) "
                           "ON CONFLICT (user_id, idem_key) DO NOTHING",
                           "isssssi", user, c->key, c->fingerprint, req->method, req->path,
                           c->canonical_body, j->now);
    if (rc != DB_DONE)
        return rc;
    if (db_changes(db) == 1) {
        c->claimed_at = j->now;
        j->verdict = KEY_ABSENT;
        return 0;
    }
    if (!load_row(db, req->user.id, c->key, &j->row))
        return DB_BUSY; /* deleted under us: the caller retries */
    j->verdict = judge(&j->row, c->fingerprint, req->app, j->now);
    if (j->verdict == KEY_ABSENT) {
        /* an expired key: claimed anew, with a new claim time and so a new processor key */
        db_exec(db,
                "UPDATE idempotency_keys SET fingerprint = $3, method = $4, path = $5, "
                "request_body = $6, state = 'started', claimed_at = $7, locked_at = $7, "
                "response_status = NULL, response_location = NULL, response_body = NULL "
                "WHERE user_id = $1 AND idem_key = $2 AND claimed_at = $8",
                "isssssii", user, c->key, c->fingerprint, req->method, req->path, c->canonical_body,
                j->now, j->row.claimed_at);
        c->claimed_at = j->now;
    } else if (j->verdict == KEY_RESUMABLE) {
        db_exec(db,
                "UPDATE idempotency_keys SET state = 'started', locked_at = $3 "
                "WHERE user_id = $1 AND idem_key = $2 AND claimed_at = $4 AND locked_at = $5 "
                "AND state = $6",
                "isiiis", user, c->key, j->now, j->row.claimed_at, j->row.locked_at, j->row.state);
        c->claimed_at = j->row.claimed_at;
        c->resumed = true;
    } else {
        return 0;
    }
    if (db_changes(db) != 1)
        j->verdict = KEY_BUSY; /* another node took it between our read and write */
    return 0;
}

bool idem_claim_or_reply(request *req)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        claim_job j = {.req = req, .now = now_us()};
        int rc = store_write(req->app->store, claim, &j);
        if (rc == DB_BUSY) {
            row_free(&j.row);
            continue;
        }
        if (rc != 0) {
            row_free(&j.row);
            reply_header(req, "Retry-After", "1");
            reply_error(req, ERR_OVERLOADED, "could not claim the Idempotency-Key; retry");
            free(req->idem->canonical_body);
            req->idem = NULL;
            return false;
        }
        if (j.verdict == KEY_ABSENT || j.verdict == KEY_RESUMABLE) {
            row_free(&j.row);
            derive_processor_key(req);
            return true;
        }
        answer_verdict(req, j.verdict, &j.row);
        row_free(&j.row);
        free(req->idem->canonical_body);
        req->idem = NULL;
        return false;
    }
    reply_header(req, "Retry-After", "1");
    reply_error(req, ERR_REQUEST_IN_PROGRESS, "the Idempotency-Key is changing hands; retry");
    return false;
}

/* ---- finish: store, release or unlock ---- */

static int store_response(db_conn *db, request *req)
{
    const char *location = response_header(req, "Location");
    return db_exec(db,
                   "UPDATE idempotency_keys SET state = 'completed', locked_at = 0, "
                   "response_status = $3, response_location = $4, response_body = $5 "
                   "WHERE user_id = $1 AND idem_key = $2 AND claimed_at = $6",
                   "isissi", (int64_t)req->user.id, req->idem->key, (int64_t)req->status, location,
                   req->resp_body ? req->resp_body : "", req->idem->claimed_at) == DB_DONE
               ? 0
               : -1;
}

typedef struct settle_job {
    request *req;
    key_disposition what;
} settle_job;

static int settle_job_run(db_conn *db, void *arg)
{
    settle_job *j = arg;
    request *req = j->req;
    switch (j->what) {
    case KEY_STORE:
        return store_response(db, req);
    case KEY_RELEASE:
        return db_exec(db,
                       "DELETE FROM idempotency_keys WHERE user_id = $1 AND idem_key = $2 "
                       "AND claimed_at = $3",
                       "isi", (int64_t)req->user.id, req->idem->key,
                       req->idem->claimed_at) == DB_DONE
                   ? 0
                   : -1;
    case KEY_UNLOCK:
        /* in doubt: locked_at now records when it was left, so the recoverer waits a lock
         * timeout before finishing it, giving the client's own retry the first chance */
        return db_exec(db,
                       "UPDATE idempotency_keys SET state = 'in_doubt', locked_at = $4 "
                       "WHERE user_id = $1 AND idem_key = $2 AND claimed_at = $3",
                       "isii", (int64_t)req->user.id, req->idem->key, req->idem->claimed_at,
                       now_us()) == DB_DONE
                   ? 0
                   : -1;
    }
    return -1;
}

void idem_settle(request *req, key_disposition what)
{
    settle_job j = {.req = req, .what = what};
    store_write(req->app->store, settle_job_run, &j);
}

void idem_finish(request *req)
{
    if (req->idem && !req->resp_recorded)
        idem_settle(req, req->error == ERR_NONE ? KEY_STORE : problem_lookup(req->error)->key);
}

typedef struct commit_job {
    request *req;
    write_job_fn fn;
    void *ctx;
} commit_job;

static int commit_with_response(db_conn *db, void *arg)
{
    commit_job *j = arg;
    int rc = j->fn(db, j->ctx);
    if (rc != 0 || !j->req->idem || !j->req->status)
        return rc;
    key_disposition what =
        j->req->error == ERR_NONE ? KEY_STORE : problem_lookup(j->req->error)->key;
    if (what != KEY_STORE)
        return rc;
    if (store_response(db, j->req) != 0)
        return -1;
    j->req->resp_recorded = true;
    return 0;
}

int commit_response(request *req, write_job_fn fn, void *ctx)
{
    commit_job j = {.req = req, .fn = fn, .ctx = ctx};
    req->resp_recorded = false;
    int rc = store_write(req->app->store, commit_with_response, &j);
    if (rc != 0)
        req->resp_recorded = false;
    return rc;
}

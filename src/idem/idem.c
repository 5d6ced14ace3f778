#include "idem/idem.h"
#include "idem/idem_internal.h"
#include "idem/replay_cache.h"
#include "idem/verdict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/canonical.h"
#include "core/idem_key.h"
#include "core/log.h"
#include "core/timefmt.h"
#include "node/app.h"
#include "node/fault.h"
#include "node/metrics.h"
#include "request/route.h"

/* ---- the stored record and what it means for a new request ---- */

typedef struct key_row {
    char fingerprint[65];
    char state[16]; /* started, in_doubt, completed, released */
    int64_t claimed_at, locked_at, fence, generation;
    int processor_key_scheme;
    int status;
    char *location, *body; /* malloc'd */
} key_row;

static key_verdict judge(const key_row *row, const char *fingerprint, const app *a, int64_t now)
{
    stored_key k = {.state = row->state,
                    .fingerprint = row->fingerprint,
                    .claimed_at = row->claimed_at,
                    .locked_at = row->locked_at};
    return idem_judge(&k, fingerprint, now, a->cfg.idempotency_ttl_ms * 1000,
                      a->cfg.idempotency_lock_timeout_ms * 1000);
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
                           "response_location, COALESCE(response_body, (SELECT data FROM events "
                           "WHERE events.id = idempotency_keys.response_event)), fence, "
                           "generation, processor_key_scheme FROM idempotency_keys "
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
        out->fence = db_int(st, 7);
        out->generation = db_int(st, 8);
        out->processor_key_scheme = (int)db_int(st, 9);
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

/* A holder that lost its key answers what the key holds now: the stored answer, or 409 while
 * another holder (or nobody yet) has it; its own result is never told to anyone. */
static void answer_what_key_holds(request *req)
{
    db_conn *db = store_reader(req->app->store);
    key_row row = {0};
    key_verdict v = KEY_BUSY;
    if (db && load_row(db, req->user.id, req->idem->key, &row))
        v = judge(&row, req->idem->fingerprint, req->app, now_us());
    /* an error first in every case: it drops a Location or ETag the lost result had set */
    reply_error(req, ERR_REQUEST_IN_PROGRESS, "another request took over this Idempotency-Key");
    if (v == KEY_REPLAY) {
        replay(req, &row);
        req->error = ERR_NONE;
    } else if (v == KEY_MISMATCH) {
        answer_verdict(req, v, &row);
    } else {
        answer_verdict(req, KEY_BUSY, &row); /* the holder runs, or a retry will claim it */
    }
    row_free(&row);
    jsonw w;
    log_begin_request(&w, "warn", "idempotency key lost to a newer holder", req->request_id);
    jw_key(&w, "fence");
    jw_int(&w, req->idem->fence);
    jw_key(&w, "answer");
    jw_int(&w, req->status);
    log_end(&w);
    req->resp_recorded = true; /* nothing of ours may be stored for this key */
}

/* The processor key names the logical operation (§2): the user and key scope it, the
 * fingerprint separates a different request under a reused key, and the generation (the
 * claim time of the key's first claim, kept across takeovers and re-claims after a release,
 * new when an expired key is claimed anew) separates one key's lives. Under the time-ordered
 * scheme the generation, in 13 hex digits, comes first: keys made one after the other sort one
 * after the other, so a processor's unique index of them takes each new key on its last page
 * (a sha256 alone put every charge on a random page of it: a third of the pages a payment
 * wrote). The key stays 64 characters. */
void idem_processor_key(uint64_t user, const char *key, const char *fingerprint, int64_t generation,
                        int scheme, char out[IDEM_PROCESSOR_KEY_MAX])
{
    char material[512], digest[65];
    int n;
    if (generation < 0) /* a key left open by a version before fencing: its old key */
        n = snprintf(material, sizeof material, "%llu\n%s\n%lld", (unsigned long long)user, key,
                     (long long)-generation);
    else
        n = snprintf(material, sizeof material, "%llu\n%s\n%s\n%lld", (unsigned long long)user, key,
                     fingerprint, (long long)generation);
    if (n < 0 || (size_t)n >= sizeof material)
        n = (int)sizeof material - 1; /* keys are at most 255 characters: never cut */
    sha256_hex(material, (size_t)n, digest);
    if (generation >= 0 && scheme == PROCESSOR_KEY_TIME_ORDERED)
        /* 13 hex digits hold µs since 1970 until the year 2112 */
        snprintf(out, IDEM_PROCESSOR_KEY_MAX, "%013llx%.51s",
                 (unsigned long long)generation & 0xFFFFFFFFFFFFFULL, digest);
    else
        memcpy(out, digest, sizeof digest);
}

static void derive_processor_key(request *req)
{
    idem_claim *c = req->idem;
    idem_processor_key(req->user.id, c->key, c->fingerprint, c->generation, c->processor_key_scheme,
                       c->processor_key);
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
        if (v == KEY_REPLAY)
            replay_cache_keep(req, c->key, row.claimed_at + req->app->cfg.idempotency_ttl_ms * 1000,
                              row.status, row.location, row.body);
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

/* A verdict under which this request takes the key. */
static bool claimable(key_verdict v)
{
    return v == KEY_ABSENT || v == KEY_RESUMABLE || v == KEY_RELEASED;
}

typedef struct claim_job {
    request *req;
    int64_t now;
    key_verdict verdict; /* KEY_ABSENT here means "claimed" */
    key_row row;
    int attempt;
    request_step next; /* runs once the key is this request's */
    void *next_ctx;
} claim_job;

/* A token greater than any this key had, and than any it had before it was swept and made
 * again (claim times only grow), so a holder from an earlier life can never match. */
static int64_t next_fence(int64_t previous, int64_t now)
{
    return previous + 1 > now ? previous + 1 : now;
}

/* The key changed between the claim's read and its write: its holder finished, left it in
 * doubt or released it, or another request took it over. This request takes nothing and
 * answers what the key holds now (a statement of its own, so on PostgreSQL it sees what
 * committed meanwhile): the stored answer, or 409 while it is anyone else's to finish. */
static write_result claim_lost(db_conn *db, claim_job *j)
{
    request *req = j->req;
    row_free(&j->row);
    j->verdict = KEY_BUSY;
    if (load_row(db, req->user.id, req->idem->key, &j->row)) {
        key_verdict now = judge(&j->row, req->idem->fingerprint, req->app, j->now);
        if (now == KEY_REPLAY || now == KEY_MISMATCH)
            j->verdict = now;
    }
    return WRITE_OK;
}

/* A new operation takes the newest scheme the fleet knows; an operation that goes on keeps the
 * scheme it began under, as its charge may already be made under that key. */
static int newest_scheme(const app *a)
{
    return app_orders_processor_keys(a) ? PROCESSOR_KEY_TIME_ORDERED : PROCESSOR_KEY_HASHED;
}

/* A key's row as a new claim writes it, unless a row holds the key (db_changes: 0). */
static db_status insert_started_key(db_conn *db, request *req, int64_t at, int scheme)
{
    idem_claim *c = req->idem;
    return db_exec(db,
                   "INSERT INTO idempotency_keys (user_id, idem_key, fingerprint, method, path, "
                   "request_body, state, claimed_at, locked_at, fence, generation, "
                   "processor_key_scheme) "
                   "VALUES ($1, $2, $3, $4, $5, $6, 'started', $7, $7, $7, $7, $8) "
                   "ON CONFLICT (user_id, idem_key) DO NOTHING",
                   "isssssii", (int64_t)req->user.id, c->key, c->fingerprint, req->method,
                   req->path, c->canonical_body, at, (int64_t)scheme);
}

static write_result claim(db_conn *db, void *arg)
{
    claim_job *j = arg;
    request *req = j->req;
    idem_claim *c = req->idem;
    int64_t user = (int64_t)req->user.id;
    int new_scheme = newest_scheme(req->app);
    db_status rc = insert_started_key(db, req, j->now, new_scheme);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (db_changes(db) == 1) {
        c->claimed_at = c->fence = c->generation = j->now;
        c->processor_key_scheme = new_scheme;
        j->verdict = KEY_ABSENT;
        return WRITE_OK;
    }
    if (!load_row(db, req->user.id, c->key, &j->row))
        return WRITE_RETRY; /* deleted under us: the caller retries */
    j->verdict = judge(&j->row, c->fingerprint, req->app, j->now);
    if (!claimable(j->verdict))
        return WRITE_OK;
    /* PostgreSQL: the row is not locked by the read, so its holder may finish (or another
     * request take it over) right here; the write below names everything the verdict read */
    fault_point("claim-between-read-and-write");
    int64_t fence = next_fence(j->row.fence, j->now);
    if (j->verdict == KEY_ABSENT || j->verdict == KEY_RELEASED) {
        /* a new request for this key; an expired key starts a new generation (so a new
         * processor key), a released one keeps its own: the operation it stood for may still
         * have reached the processor through a holder that lost the key */
        bool anew = j->verdict == KEY_ABSENT;
        int64_t generation = anew ? j->now : j->row.generation;
        int scheme = anew ? new_scheme : j->row.processor_key_scheme;
        rc = db_exec(db,
                     "UPDATE idempotency_keys SET fingerprint = $3, method = $4, path = $5, "
                     "request_body = $6, state = 'started', claimed_at = $7, locked_at = $7, "
                     "fence = $8, generation = $9, processor_key_scheme = $11, "
                     "response_status = NULL, response_location = NULL, response_body = NULL, "
                     "response_event = NULL WHERE user_id = $1 AND idem_key = $2 AND fence = $10 "
                     "AND state = $12 AND locked_at = $13",
                     "isssssiiiiisi", user, c->key, c->fingerprint, req->method, req->path,
                     c->canonical_body, j->now, fence, generation, j->row.fence, (int64_t)scheme,
                     j->row.state, j->row.locked_at);
        c->generation = generation;
        c->processor_key_scheme = scheme;
        c->resumed = j->verdict == KEY_RELEASED;
    } else if (j->verdict == KEY_RESUMABLE) {
        rc = db_exec(db,
                     "UPDATE idempotency_keys SET state = 'started', locked_at = $3, fence = $4 "
                     "WHERE user_id = $1 AND idem_key = $2 AND fence = $5 AND state = $6 "
                     "AND locked_at = $7",
                     "isiiisi", user, c->key, j->now, fence, j->row.fence, j->row.state,
                     j->row.locked_at);
        c->generation = j->row.generation;
        c->processor_key_scheme = j->row.processor_key_scheme;
        c->resumed = true;
    }
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    if (db_changes(db) != 1)
        return claim_lost(db, j);
    c->claimed_at = j->now;
    c->fence = fence;
    return WRITE_OK;
}

void idem_forget(request *req)
{
    if (!req->idem)
        return;
    free(req->idem->canonical_body);
    req->idem = NULL;
}

static step_result claim_done(request *req, void *arg)
{
    claim_job *j = arg;
    write_result r = req->write_result;
    key_row row = j->row;
    j->row = (key_row){0};
    if (r == WRITE_RETRY && ++j->attempt < 3) {
        row_free(&row);
        j->now = now_us();
        return request_write_then(req, claim, j, claim_done);
    }
    if (r == WRITE_RETRY) {
        row_free(&row);
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_REQUEST_IN_PROGRESS, "the Idempotency-Key is changing hands; retry");
        idem_forget(req);
        return STEP_DONE;
    }
    if (r != WRITE_OK) {
        row_free(&row);
        jsonw w;
        log_begin_request(&w, "error", "idempotency claim failed", req->request_id);
        jw_key(&w, "result");
        jw_string(&w, write_result_name(r));
        log_end(&w);
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_DATABASE_UNAVAILABLE,
                    "could not claim the Idempotency-Key; retry with the same key");
        idem_forget(req);
        return STEP_DONE;
    }
    if (claimable(j->verdict)) {
        row_free(&row);
        derive_processor_key(req);
        return j->next(req, j->next_ctx);
    }
    answer_verdict(req, j->verdict, &row);
    row_free(&row);
    idem_forget(req);
    return STEP_DONE;
}

step_result idem_claim_then(request *req, request_step next, void *next_ctx)
{
    claim_job *j = arena_alloc(&req->arena, sizeof *j);
    *j = (claim_job){.req = req, .now = now_us(), .next = next, .next_ctx = next_ctx};
    return request_write_then(req, claim, j, claim_done);
}

/* ---- finish: store, release or unlock; every write names the holder's fence ---- */

/* Every write after the claim names the holder's fence and must change the key's one row;
 * none changed means a newer holder has the key. On PostgreSQL the check may travel with the
 * job's next statement (db_exec_checked). */
#define FENCED_WRITE(db, sql, types, ...)                                                          \
    fenced_result(db_exec_checked(db, 1, WRITE_FENCED, sql, types, __VA_ARGS__))

/* A fenced write's code as the job's result: WRITE_FENCED, or the db_status it met. */
static write_result fenced_result(int rc)
{
    return rc == WRITE_FENCED ? WRITE_FENCED : write_result_of_db((db_status)rc);
}

/* What a key stores of its answer (store_response, write_key_once): the event that holds it,
 * when the key may name one, or else the body. */
static uint64_t answer_event(request *req)
{
    return app_answers_by_event(req->app) ? req->resp_event : 0;
}

static const char *answer_body(request *req, uint64_t event)
{
    return event                 ? NULL
           : req->resp_kept_body ? req->resp_kept_body
           : req->resp_body      ? req->resp_body
                                 : "";
}

/* The answer is stored with the key (or what the handler chose to keep instead of it: a create
 * that shows a secret keeps its answer without the secret). When an event of the same job recorded
 * this very body as its data (a payment's 201), the key names that event instead of keeping a
 * second copy (app_answers_by_event says when that is safe); a replay reads the body from the
 * event. The request's body goes: only the recoverer reads it, and only of an open key (a retry
 * is judged by the fingerprint; a re-claim writes its own). */
static write_result store_response(db_conn *db, request *req)
{
    uint64_t event = answer_event(req);
    return FENCED_WRITE(db,
                        "UPDATE idempotency_keys SET state = 'completed', locked_at = 0, "
                        "request_body = NULL, response_status = $3, response_location = $4, "
                        "response_body = $5, response_event = $7 WHERE user_id = $1 AND idem_key = "
                        "$2 AND fence = $6",
                        "isissiz", (int64_t)req->user.id, req->idem->key, (int64_t)req->status,
                        response_header(req, "Location"), answer_body(req, event), req->idem->fence,
                        (int64_t)event);
}

typedef struct settle_job {
    request *req;
    key_disposition what;
} settle_job;

static write_result settle_job_run(db_conn *db, void *arg)
{
    settle_job *j = arg;
    request *req = j->req;
    switch (j->what) {
    case KEY_STORE:
        return store_response(db, req);
    case KEY_RELEASE:
        /* the row stays, marked released, so its generation (and with it the processor key)
         * survives for a re-claim of the same request; the sweeper removes it after the TTL */
        return FENCED_WRITE(db,
                            "UPDATE idempotency_keys SET state = 'released', locked_at = 0, "
                            "response_status = NULL, response_location = NULL, "
                            "response_body = NULL, response_event = NULL "
                            "WHERE user_id = $1 AND idem_key = $2 AND fence = $3 "
                            "AND state = 'started'",
                            "isi", (int64_t)req->user.id, req->idem->key, req->idem->fence);
    case KEY_UNLOCK:
        /* in doubt: locked_at now records when it was left, so the recoverer waits a lock
         * timeout before finishing it, giving the client's own retry the first chance.
         * Both this and the release apply only to a key still 'started': a commit that
         * landed although its answer was lost (a session cut during COMMIT) completed the
         * key under this same fence, and reopening it would let a retry record the charge a
         * second time; it is answered from the key instead (WRITE_FENCED). */
        return FENCED_WRITE(db,
                            "UPDATE idempotency_keys SET state = 'in_doubt', locked_at = $4 "
                            "WHERE user_id = $1 AND idem_key = $2 AND fence = $3 "
                            "AND state = 'started'",
                            "isii", (int64_t)req->user.id, req->idem->key, req->idem->fence,
                            now_us());
    }
    return WRITE_FAILED;
}

void idem_settle(request *req, key_disposition what)
{
    settle_job j = {.req = req, .what = what};
    write_result r = store_write(req->app->store, settle_job_run, &j);
    if (r == WRITE_FENCED) {
        answer_what_key_holds(req);
    } else if (r != WRITE_OK) {
        /* the key stays as it was (started): a retry past the lock timeout, or the recoverer,
         * takes it over. A success we could not store is not told as one: the client retries. */
        jsonw w;
        log_begin_request(&w, "error", "idempotency key not settled", req->request_id);
        jw_key(&w, "result");
        jw_string(&w, write_result_name(r));
        jw_key(&w, "status");
        jw_int(&w, req->status);
        log_end(&w);
        if (what == KEY_STORE) {
            reply_header(req, "Retry-After", "1");
            reply_error(req, ERR_DATABASE_UNAVAILABLE,
                        "the answer could not be stored; retry with the same Idempotency-Key");
        }
    }
}

void idem_finish(request *req)
{
    if (req->idem && req->idem->claim_in_write) {
        idem_forget(req); /* answered before the write job that was to claim it: none was */
        return;
    }
    if (req->idem && !req->resp_recorded)
        idem_settle(req, req->error == ERR_NONE ? KEY_STORE : problem_lookup(req->error)->key);
}

typedef struct commit_job {
    request *req;
    write_job_fn fn;
    void *ctx;
    request_step next; /* commit_response_then: runs after the commit */
    void *next_ctx;
    bool claiming;   /* the key is claimed in this job, before fn (claim_in_write) */
    claim_job claim; /* then: what the claim found */
    bool key_at_end; /* ... and no row held it: the row is written once, after fn */
} commit_job;

/* A claim in the job that answers it. When no row holds the key, nothing is written yet: the
 * row is inserted once at the end, with the answer (write_key_once), instead of a claim the
 * answer then updates; a key that has a row takes the claim's usual path (claim). */
static write_result claim_or_defer(db_conn *db, commit_job *j)
{
    request *req = j->req;
    idem_claim *c = req->idem;
    db_stmt *st =
        db_query(db, "SELECT 1 FROM idempotency_keys WHERE user_id = $1 AND idem_key = $2", "is",
                 (int64_t)req->user.id, c->key);
    db_status rc = db_step(st);
    db_done(st);
    j->key_at_end = rc == DB_DONE;
    if (rc == DB_ROW)
        return claim(db, &j->claim);
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    c->claimed_at = c->fence = c->generation = j->claim.now;
    c->processor_key_scheme = newest_scheme(req->app);
    j->claim.verdict = KEY_ABSENT;
    return WRITE_OK;
}

/* The deferred claim's one write: the key completed with its answer, or started when the
 * answer is settled after the commit (a release or an unlock, idem_finish), as claim writes
 * it. A row another request inserted meanwhile (PostgreSQL) runs the job again, which then
 * answers as that row says. */
static write_result write_key_once(db_conn *db, request *req, bool with_answer)
{
    idem_claim *c = req->idem;
    db_status rc;
    if (with_answer) {
        uint64_t event = answer_event(req);
        rc = db_exec(db,
                     "INSERT INTO idempotency_keys (user_id, idem_key, fingerprint, method, path, "
                     "state, claimed_at, locked_at, fence, generation, processor_key_scheme, "
                     "response_status, response_location, response_body, response_event) "
                     "VALUES ($1, $2, $3, $4, $5, 'completed', $6, 0, $6, $6, $7, $8, $9, $10, "
                     "$11) ON CONFLICT (user_id, idem_key) DO NOTHING",
                     "issssiiissz", (int64_t)req->user.id, c->key, c->fingerprint, req->method,
                     req->path, c->claimed_at, (int64_t)c->processor_key_scheme,
                     (int64_t)req->status, response_header(req, "Location"),
                     answer_body(req, event), (int64_t)event);
    } else {
        rc = insert_started_key(db, req, c->claimed_at, c->processor_key_scheme);
    }
    if (rc != DB_DONE)
        return write_result_of_db(rc);
    return db_changes(db) == 1 ? WRITE_OK : WRITE_RETRY;
}

/* The fence first, before the job's writes: no takeover can slip between this check and the
 * commit, and a stale holder keeps nothing (its job fails FENCED, whatever its later writes
 * met, and they are undone with it). PostgreSQL: a row lock on the key, without a new row
 * version. SQLite's one writer holds the whole database until the commit, so a read is enough
 * (an update of the row, as before, cost 6 % of the writer's time). */
static write_result hold_fence(db_conn *db, request *req)
{
    if (db_kind_of(db) == DB_POSTGRES)
        return FENCED_WRITE(db,
                            "SELECT 1 FROM idempotency_keys WHERE user_id = $1 AND idem_key = $2 "
                            "AND fence = $3 FOR UPDATE",
                            "isi", (int64_t)req->user.id, req->idem->key, req->idem->fence);
    db_stmt *st = db_query(db,
                           "SELECT 1 FROM idempotency_keys WHERE user_id = $1 AND idem_key = $2 "
                           "AND fence = $3",
                           "isi", (int64_t)req->user.id, req->idem->key, req->idem->fence);
    db_status rc = db_step(st);
    db_done(st);
    return rc == DB_ROW ? WRITE_OK : rc == DB_DONE ? WRITE_FENCED : write_result_of_db(rc);
}

static write_result commit_with_response(db_conn *db, void *arg)
{
    commit_job *j = arg;
    request *req = j->req;
    if (j->claiming) {
        /* the claim first, in this very transaction: a key another request holds or answered
         * leaves nothing written (WRITE_REFUSED), and a failure of fn undoes the claim too */
        row_free(&j->claim.row); /* a batch run again runs the claim again */
        j->claim.now = now_us();
        write_result rc = claim_or_defer(db, j);
        if (rc != WRITE_OK)
            return rc;
        if (!claimable(j->claim.verdict))
            return WRITE_REFUSED;
        derive_processor_key(req); /* fn may call the processor under it */
    } else if (req->idem) {
        write_result rc = hold_fence(db, req);
        if (rc != WRITE_OK)
            return rc;
    }
    write_result rc = j->fn(db, j->ctx);
    if (rc != WRITE_OK || !req->idem)
        return rc;
    key_disposition what = req->error == ERR_NONE ? KEY_STORE : problem_lookup(req->error)->key;
    bool answered = req->status && what == KEY_STORE;
    if (j->claiming && j->key_at_end) {
        rc = write_key_once(db, req, answered);
        req->resp_recorded = rc == WRITE_OK && answered;
        return rc;
    }
    if (!answered)
        return rc;
    rc = store_response(db, req);
    if (rc != WRITE_OK)
        return rc;
    req->resp_recorded = true;
    return WRITE_OK;
}

/* What a commit came to, said once for both forms: a holder that lost its key answers what the
 * key holds (a read); a failure leaves one line. */
static void commit_outcome(request *req, write_result r)
{
    if (r != WRITE_OK)
        req->resp_recorded = false;
    if (r == WRITE_FENCED)
        answer_what_key_holds(req);
    else if (r != WRITE_OK && r != WRITE_REFUSED) {
        jsonw w;
        log_begin_request(&w, "error", "write job failed", req->request_id);
        jw_key(&w, "route");
        jw_string(&w, req->route ? req->route->name : "");
        jw_key(&w, "result");
        jw_string(&w, write_result_name(r));
        log_end(&w);
    }
}

/* After a job that claimed the key itself: a key held or answered by another request answers
 * the request as a claim would (true, done); a job that kept nothing kept no claim either, so
 * there is no key to settle. */
static bool settle_claim_in_write(request *req, commit_job *j, write_result r)
{
    key_row row = j->claim.row;
    j->claim.row = (key_row){0};
    j->claiming = false;
    bool answered = r == WRITE_REFUSED && !claimable(j->claim.verdict);
    if (answered)
        answer_verdict(req, j->claim.verdict, &row);
    row_free(&row);
    if (r != WRITE_OK)
        idem_forget(req);
    return answered;
}

static step_result after_commit(request *req, void *arg)
{
    commit_job *j = arg;
    write_result r = req->write_result;
    if (j->claiming) {
        if (r == WRITE_RETRY && ++j->claim.attempt < 3) /* the key changed hands meanwhile */
            return request_write_then(req, commit_with_response, j, after_commit);
        if (settle_claim_in_write(req, j, r))
            return STEP_DONE;
    }
    if (r == WRITE_FENCED)
        STEP_MAY_BLOCK(req, after_commit, j); /* its answer needs a read */
    commit_outcome(req, r);
    req->write_result = r;
    return j->next(req, j->next_ctx);
}

step_result commit_response_then(request *req, write_job_fn fn, void *ctx, request_step next,
                                 void *next_ctx)
{
    commit_job *j = arena_alloc(&req->arena, sizeof *j);
    *j = (commit_job){.req = req, .fn = fn, .ctx = ctx, .next = next, .next_ctx = next_ctx};
    if (req->idem && req->idem->claim_in_write) {
        j->claiming = true;
        j->claim = (claim_job){.req = req};
        req->idem->claim_in_write = false; /* later writes name the fence it gets */
    }
    req->resp_recorded = false;
    return request_write_then(req, commit_with_response, j, after_commit);
}

/* ---- charges no record will carry ---- */

typedef struct void_job {
    request *req;
    uint64_t account_id;
    const char *charge_id;
    int64_t amount;
} void_job;

static write_result queue_void(db_conn *db, void *arg)
{
    void_job *j = arg;
    request *req = j->req;
    return write_result_of_db(
        db_exec(db,
                "INSERT INTO charge_voids (processor_key, user_id, idem_key, fingerprint, "
                "generation, account_id, charge_id, amount, created_at) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
                "sissiisii", req->idem->processor_key, (int64_t)req->user.id, req->idem->key,
                req->idem->fingerprint, req->idem->generation, (int64_t)j->account_id, j->charge_id,
                j->amount, now_us()));
}

static step_result void_queued(request *req, void *arg)
{
    void_job *j = arg;
    write_result r = req->write_result;
    jsonw w;
    log_begin_request(&w, r == WRITE_OK ? "warn" : "error", "charge queued for a void check",
                      req->request_id);
    jw_key(&w, "charge_id");
    jw_string(&w, j->charge_id);
    jw_key(&w, "result");
    jw_string(&w, write_result_name(r));
    log_end(&w);
    return STEP_DONE;
}

step_result idem_queue_charge_void_then(request *req, uint64_t account_id, const char *charge_id,
                                        int64_t amount)
{
    void_job *j = arena_alloc(&req->arena, sizeof *j);
    *j = (void_job){.req = req, .account_id = account_id, .charge_id = charge_id, .amount = amount};
    return request_write_then(req, queue_void, j, void_queued);
}

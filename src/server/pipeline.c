#include "server/pipeline.h"

#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api/routes.h"
#include "core/holder_count.h"
#include "core/ids.h"
#include "core/jsonw.h"
#include "core/livemode.h"
#include "core/log.h"
#include "core/timefmt.h"
#include "http/server.h"
#include "http/validate.h"
#include "http/workers.h"
#include "idem/idem.h"
#include "idem/replay_cache.h"
#include "node/auth.h"
#include "node/metrics.h"
#include "request/input.h"
#include "request/route.h"
#include "request/step.h"
#include "server/access_log.h"
#include "server/limits.h"

/* ---- request ids and the access log ---- */

static bool valid_request_id(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (s[n] < 0x21 || s[n] > 0x7e || n >= 128)
            return false;
    return n >= 1;
}

/* SplitMix64: a 64-bit state stepped by a constant, each output a bijective mix of it, so one
 * thread's outputs never repeat within 2^64 steps. */
static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void set_request_id(request *req)
{
    const char *given = request_header(req, "X-Request-Id");
    if (given && valid_request_id(given)) {
        snprintf(req->request_id, sizeof req->request_id, "%s", given);
        return;
    }
    /* 96 bits from a per-thread generator seeded once from the system's random source: ids must
     * not repeat, not be secret, and RAND_bytes on every request cost ~5 % of a /healthz */
    static _Thread_local uint64_t state;
    static _Thread_local bool seeded;
    if (!seeded) {
        RAND_bytes((uint8_t *)&state, sizeof state);
        seeded = true;
    }
    uint64_t a = splitmix64(&state), b = splitmix64(&state);
    static const char hex[] = "0123456789abcdef";
    memcpy(req->request_id, "req_", 4);
    for (int i = 0; i < 16; i++)
        req->request_id[4 + i] = hex[(a >> (60 - 4 * i)) & 15];
    for (int i = 0; i < 8; i++)
        req->request_id[20 + i] = hex[(b >> (60 - 4 * i)) & 15];
    req->request_id[28] = '\0';
}

/* The idempotency outcome of a request that sent a key: its answer replayed, refused because
 * the key is in flight or was used for another request, or this request ran the operation (a
 * retry that took over a key left in doubt included); NULL when no key was used. */
static const char *idempotency_outcome(request *req)
{
    if (req->resp_header_count && response_header(req, "Idempotent-Replayed"))
        return "replayed";
    if (req->error == ERR_REQUEST_IN_PROGRESS)
        return "in_flight";
    if (req->error == ERR_IDEMPOTENCY_KEY_REUSED)
        return "reused";
    return req->idem ? "new" : NULL;
}

/* The problem code of an answer libmicrohttpd or the connection guard gave itself (a 400 is a
 * request head it could not parse). */
static const char *code_of_status(int status)
{
    switch (status) {
    case 400:
        return problem_lookup(ERR_INVALID_HEADER)->code;
    case 408:
        return problem_lookup(ERR_REQUEST_TIMEOUT)->code;
    case 413:
        return problem_lookup(ERR_PAYLOAD_TOO_LARGE)->code;
    case 414:
        return problem_lookup(ERR_URI_TOO_LONG)->code;
    case 431:
        return problem_lookup(ERR_HEADERS_TOO_LARGE)->code;
    default: /* 505 and the like: no code of payd's table says it */
        return NULL;
    }
}

/* An answer's problem code, read before its body goes to the HTTP layer: the error the request
 * ended in, or for a replayed problem the `code` its stored body names. */
static void note_problem_code(request *req)
{
    if (req->status < 400)
        return;
    if (req->error != ERR_NONE) {
        req->problem_code = problem_lookup(req->error)->code;
        return;
    }
    json_t *body = req->resp_body ? json_loadb(req->resp_body, req->resp_len, 0, NULL) : NULL;
    const problem_def *known = problem_by_code(json_string_value(json_object_get(body, "code")));
    json_decref(body);
    req->problem_code = known ? known->code : code_of_status(req->status);
}

/* The addresses and the user agent, once the headers are in. The agent is the client's own
 * text: cut to a bound, and escaped like every value when the line is written. */
#define USER_AGENT_LOGGED_MAX 200

static void note_client(request *req, http_exchange *ex)
{
    if (!http_exchange_peer_address(ex, req->client_ip, sizeof req->client_ip))
        return;
    char client[sizeof req->forwarded_for];
    if (http_exchange_client_address(ex, client, sizeof client) && strcmp(client, req->client_ip))
        memcpy(req->forwarded_for, client, sizeof client);
    const char *agent = request_header(req, "User-Agent");
    if (agent)
        req->user_agent = arena_strndup(&req->arena, agent, USER_AGENT_LOGGED_MAX);
}

/* One line per request, written by the access log's own thread (server/access_log.c). */
static void access_log(request *req, int64_t duration_us)
{
    access_record r = {
        .at_us = now_us(),
        .duration_us = duration_us,
        .status = req->status,
        .user_id = req->authenticated ? req->user.owner : 0,
        .livemode = req->authenticated ? !req->user.test : -1,
        .idempotency = idempotency_outcome(req),
        .route = req->route ? req->route->name : "unmatched",
        .request_id = req->request_id,
        .method = req->method,
        .client_ip = req->client_ip,
        .forwarded_for = req->forwarded_for,
        .user_agent = req->user_agent,
        .bytes_in = req->bytes_in,
        .bytes_out = req->bytes_out,
        .code = req->status >= 400 && !req->problem_code ? code_of_status(req->status)
                                                         : req->problem_code,
    };
    access_log_record(&r);
}

/* ---- the pipeline ---- */

/* 413, 415 and invalid_json, in that order; on success req->json holds the object. */
static bool parse_body_or_reply(request *req, const char *body, size_t len, bool too_large)
{
    edge_verdict v;
    char detail[256];
    if (edge_parse_body(request_header(req, "Content-Type"), body, len, too_large, &req->json, &v,
                        detail, sizeof detail))
        return true;
    reply_error(req, error_of_refusal(v.err), detail);
    return false;
}

/* An API key that crossed a network in clear may have been read on the way: said once per
 * process, so the operator learns that TLS is missing without a line per request. */
static void warn_key_in_clear(request *req)
{
    static atomic_bool warned;
    if (!req->exchange || !http_exchange_in_clear_from_afar(req->exchange) ||
        atomic_exchange(&warned, true))
        return;
    log_msg("warn", "an API key came over plain HTTP from another machine: serve HTTPS "
                    "(--tls-cert) or terminate TLS in a proxy named by --trust-proxy");
}

static bool authenticate(request *req)
{
    const char *h = request_header(req, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    warn_key_in_clear(req);
    const char *key = h + 7;
    while (*key == ' ')
        key++;
    req->authenticated = auth_verify(req->app, key, &req->user);
    return req->authenticated;
}

/* Every answer of 500 or more leaves one line naming the request, the route and the cause (a
 * processor that did not answer, a write job that could not commit, ...). */
static void log_failed_request(request *req)
{
    jsonw w;
    log_begin(&w, "error", "request failed");
    jw_key(&w, "route");
    jw_string(&w, req->route->name);
    jw_key(&w, "status");
    jw_int(&w, req->status);
    jw_key(&w, "code");
    jw_string(&w, problem_lookup(req->error)->code);
    jw_key(&w, "detail");
    jw_string(&w, req->error_detail);
    log_end(&w);
}

/* A request whose database work failed because the database was unreachable, or a statement,
 * lock or pool timeout struck, answers 503 with Retry-After whatever its code concluded from
 * the failed query (a 500, a 404 for a row it could not read, a 401 for a key it could not
 * look up): the client should retry, not give up. /readyz words its own answer. */
static bool database_failure_reply(request *req)
{
    db_failure f = db_thread_failure();
    if (f == DB_FAILURE_NONE || req->error == ERR_NOT_READY)
        return false;
    reply_header(req, "Retry-After", "1");
    if (f == DB_FAILURE_UNAVAILABLE)
        reply_error(req, ERR_DATABASE_UNAVAILABLE,
                    "the database cannot be reached right now; retry shortly");
    else if (req->idem) /* a claimed key may have moved money: it must stay for the retry */
        reply_error(req, ERR_DATABASE_TIMEOUT,
                    "a database lock or statement timed out; retry with the same key");
    else
        reply_error(req, ERR_OVERLOADED, "the database is too busy right now; retry shortly");
    return true;
}

void run_step(request *req, route_handler step)
{
    log_set_request_id(req->request_id);
    if (step)
        step(req);
    database_failure_reply(req);
    if (req->idem)
        idem_finish(req);
    if (req->status >= 500)
        log_failed_request(req);
    log_set_request_id(NULL);
}

/* An authenticated request's JSON answer says the mode of every object in it (docs/modes.md):
 * all of them are of its key's mode. The row writers write it (jw_init_answer); what they did
 * not write is marked here on its way out: answers built with jansson, a replay of an answer
 * stored before its objects said their mode, an event's stored data. An object that says its
 * mode already is left as it is, so the mark is never doubled. */
static void mark_livemode(request *req)
{
    if (!req->authenticated || !req->resp_len || req->resp_says_mode)
        return;
    const char *type = response_header(req, "Content-Type");
    if (type && !strstr(type, "json"))
        return;
    size_t len;
    char *marked = json_mark_livemode(req->resp_body, req->resp_len, !req->user.test, &len);
    if (!marked)
        return;
    free(req->resp_body);
    req->resp_body = marked;
    req->resp_len = len;
}

/* The request's answer, handed to the HTTP layer: sent when its exchange is next served. */
static void answer(request *req)
{
    if (!req->status)
        reply_error(req, ERR_INTERNAL, "the handler gave no answer");
    mark_livemode(req);
    _Static_assert(MAX_RESP_HEADERS + 2 <= HTTP_MAX_ANSWER_HEADERS, "the HTTP layer keeps them");
    http_header headers[MAX_RESP_HEADERS + 2];
    size_t n = 0;
    if ((req->resp_len || req->status >= 400) && !response_header(req, "Content-Type")) {
        const char *type =
            req->status >= 400 ? "application/problem+json" : "application/json; charset=utf-8";
        headers[n++] = (http_header){"Content-Type", type};
    }
    headers[n++] = (http_header){"X-Request-Id", req->request_id};
    for (int i = 0; i < req->resp_header_count; i++)
        headers[n++] = (http_header){req->resp_headers[i].name, req->resp_headers[i].value};
    note_problem_code(req);
    req->bytes_out = (int64_t)req->resp_len;
    http_response r = {req->status, req->resp_body, req->resp_len, headers, n};
    req->resp_body = NULL; /* the HTTP layer's now */
    http_exchange_respond(req->exchange, &r);
}

/* ---- requests that wait: continuations (request/step.h) ---- */

/* The request has its answer and its key is settled: its connection's thread sends it. */
static void resume(request *req)
{
    if (req->status >= 500)
        log_failed_request(req);
    answer(req);
    http_exchange_resume(req->exchange); /* in_flight counts it until it completes */
}

static void settle_on_worker(void *item)
{
    request *req = item;
    log_set_request_id(req->request_id);
    idem_finish(req);
    store_thread_done(req->app->store);
    resume(req);
    log_set_request_id(NULL);
}

/* A database failure is a 503 whatever the steps concluded; a key whose answer is not stored
 * yet is settled by a write, which a writer's own thread cannot wait for: a worker does it. */
static void finish_waiting(request *req)
{
    database_failure_reply(req);
    if (req->idem && !req->resp_recorded && !req->may_block) {
        worker_pool_submit(req->app->workers, settle_on_worker, req);
        return;
    }
    idem_finish(req);
    resume(req);
}

typedef struct worker_step {
    request *req;
    request_step step;
    void *ctx;
    db_failure failure; /* of the thread that handed it over: the answer still needs it */
} worker_step;

static void run_step_on_worker(void *item)
{
    worker_step w = *(worker_step *)item;
    free(item);
    store *s = w.req->app->store;
    db_thread_failure_reset();
    db_note_failure(w.failure);
    log_set_request_id(w.req->request_id);
    w.req->may_block = true;
    request_continue(w.req, w.step, w.ctx);
    store_thread_done(s);
    log_set_request_id(NULL);
}

static void hand_to_worker(request *req, request_step step, void *ctx)
{
    worker_step *w = malloc(sizeof *w);
    *w = (worker_step){req, step, ctx, db_thread_failure()};
    worker_pool_submit(req->app->workers, run_step_on_worker, w);
}

static const request_runner pipeline_runner = {.finish = finish_waiting,
                                               .on_worker = hand_to_worker};

/* A route written as steps starts its chain wherever it is (after its claim, if it takes a
 * key). */
static step_result run_start(request *req, void *ctx)
{
    (void)ctx;
    return req->route->start(req, req->prepared);
}

static step_result claim_then_handle(request *req, void *ctx)
{
    return idem_claim_then(req, run_start, ctx);
}

/* ---- the edge: checks every request passes before any handler, claim or rate limit ---- */

#define MAX_FIELDS     256
#define MAX_QUERY_ARGS 128 /* far above what any route takes; more are refused 414 unparsed */

static void reply_verdict(request *req, const edge_verdict *v)
{
    reply_error_extra(req, error_of_refusal(v->err), v->detail,
                      json_pack("{s:s}", "param", v->param));
}

/* Header and query checks of §1. False when it has answered. */
static bool edge_checks_or_reply(request *req)
{
    app *a = req->app;
    http_field fields[MAX_FIELDS];
    size_t n;
    if (!http_exchange_headers(req->exchange, fields, MAX_FIELDS, &n) ||
        n > (size_t)a->cfg.max_headers) {
        reply_error(req, ERR_HEADERS_TOO_LARGE, "too many request headers");
        return false;
    }
    edge_verdict v;
    if (!edge_check_headers(fields, n, request_singleton_headers, &v)) {
        reply_verdict(req, &v);
        return false;
    }
    if (!http_exchange_query_args(req->exchange, fields, MAX_FIELDS, &n)) {
        reply_error(req, ERR_URI_TOO_LONG, "too many query parameters");
        return false;
    }
    if (!edge_check_query(fields, n, req->route->query, &v)) {
        reply_verdict(req, &v);
        return false;
    }
    return true;
}

/* Everything decided before the body is read: route, edge checks, auth and rate limit. Runs
 * once per request; with Expect: 100-continue it runs before libmicrohttpd sends the 100, so a
 * client is only asked for its body once the request is known to be acceptable. */
static void admit(request *req)
{
    app *a = req->app;
    req->admitted = true;
    char allow[96];
    route_match_result m = route_match(payd_routes, payd_route_count, req->method, req->path,
                                       &req->arena, &req->route, req->params, allow, sizeof allow);
    if (m == ROUTE_NO_PATH) {
        reply_error(req, ERR_ROUTE_NOT_FOUND, "no route matches this path");
        return;
    }
    if (m == ROUTE_WRONG_METHOD) {
        reply_header(req, "Allow", allow);
        reply_error(req, ERR_METHOD_NOT_ALLOWED, "this path does not accept that method");
        return;
    }
    if (atomic_load(&a->shutting_down)) {
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_SHUTTING_DOWN, "the server is shutting down; retry on another node");
        return;
    }
    if (!edge_checks_or_reply(req))
        return;
    if (req->route->flags & ROUTE_AUTH) {
        /* Unknown callers are limited by address, so guessing keys is throttled too. */
        bool known = authenticate(req);
        if (!known && db_thread_failure() != DB_FAILURE_NONE) {
            database_failure_reply(req); /* the key could not be looked up: never a 401 */
            return;
        }
        if (!rate_limit_or_reply(req))
            return;
        if (!known) {
            reply_header(req, "WWW-Authenticate", "Bearer realm=\"payd\"");
            reply_error(req, ERR_UNAUTHORIZED,
                        request_header(req, "Authorization")
                            ? "the API key is not valid"
                            : "send Authorization: Bearer <api_key>");
            return;
        }
        if (!in_progress_or_reply(req))
            return;
    }
}

/* Everything after the body is in. True when the request now waits (for a write job or a
 * worker): its connection is suspended, and whoever finishes the wait resumes it, possibly
 * before this returns. */
static bool dispatch(request *req, const char *body, size_t len, bool too_large)
{
    app *a = req->app;
    if (!req->admitted)
        admit(req);
    if (req->status)
        return false;
    unsigned flags = req->route->flags;
    /* a retry that repeats, byte for byte, a request whose answer was replayed before: that
     * answer again, before its body is parsed (idem/replay_cache.c) */
    if ((flags & (ROUTE_IDEM_REQUIRED | ROUTE_IDEM_OPTIONAL)) && !too_large &&
        replay_cache_answer(req, body, len))
        return false;
    if ((flags & ROUTE_JSON_BODY) && !parse_body_or_reply(req, body, len, too_large))
        return false;
    /* the declared body and query (http/schema.h): a refused request claims no key and costs
     * no write */
    if (!route_input_or_reply(req))
        return false;
    if ((flags & ROUTE_WRITES) && !app_ids_ready(a)) {
        /* started while the database was away: no node id yet, so nothing can be written */
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_DATABASE_UNAVAILABLE, "the database cannot be reached right now");
        return false;
    }
    if ((flags & ROUTE_WRITES) && store_queue_depth(a->store) > a->cfg.max_queue) {
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_OVERLOADED, "too many requests are waiting for the database");
        return false;
    }
    if ((flags & (ROUTE_IDEM_REQUIRED | ROUTE_IDEM_OPTIONAL)) &&
        idem_precheck(req) == IDEM_ANSWERED)
        return false;
    if (req->route->prepare) {
        /* checks that answer before any key is claimed (reads, on this thread) */
        req->route->prepare(req);
        if (req->status) {
            idem_forget(req);
            run_step(req, NULL);
            return false;
        }
    }
    if (req->route->start) {
        atomic_fetch_add(&a->in_flight, 1);
        if (atomic_load(&a->shutting_down)) {
            /* the stop began while this request was checked and prepared (reads that may wait
             * on a slow database): it set shutting_down before it counted in_flight, so either
             * it waits for this request or this request sees it, and never suspends a
             * connection the stopping server would find */
            atomic_fetch_sub(&a->in_flight, 1);
            reply_header(req, "Retry-After", "1");
            reply_error(req, ERR_SHUTTING_DOWN,
                        "the server is shutting down; retry on another node");
            idem_forget(req);
            run_step(req, NULL);
            return false;
        }
        req->runner = &pipeline_runner;
        http_exchange_suspend(req->exchange);
        /* a route, or a prepare step for its request (a payment charged in its own write
         * job), may have the handler's write job claim the key */
        bool claim_first =
            req->idem && !req->idem->claim_in_write && !(flags & ROUTE_CLAIM_IN_WRITE);
        if (req->idem && !claim_first)
            req->idem->claim_in_write = true;
        request_continue(req, claim_first ? claim_then_handle : run_start, NULL);
        return true;
    }
    run_step(req, req->route->handler);
    return false;
}

/* ---- the HTTP layer's callbacks (http/server.h) ---- */

static void *on_request_line(void *ctx, http_exchange *ex)
{
    request *req = calloc(1, sizeof *req);
    arena_init(&req->arena);
    req->app = ctx;
    req->exchange = ex;
    req->start_ns = monotonic_ns();
    return req;
}

/* The limits of --max-header-bytes, answered as problem+json. libmicrohttpd's pool is 8 KiB
 * larger, so only a request that does not fit the pool gets the library's own HTML 414/431. */
static bool size_limits_or_reply(request *req, const http_head *head)
{
    int64_t max = req->app->cfg.max_header_bytes;
    if (head->query_dropped) {
        reply_error(req, ERR_URI_TOO_LONG, "too many query parameters");
        return false;
    }
    if ((int64_t)head->target_len > max) {
        reply_error(req, ERR_URI_TOO_LONG, "the request target exceeds --max-header-bytes");
        return false;
    }
    if ((int64_t)head->header_bytes > max) {
        reply_error(req, ERR_HEADERS_TOO_LARGE, "the request headers exceed --max-header-bytes");
        return false;
    }
    return true;
}

static bool expects_continue(request *req)
{
    const char *e = request_header(req, "Expect");
    return e && !strcasecmp(e, "100-continue");
}

/* Headers complete. An answer here is sent at once and closes the connection: for requests
 * whose body must not be read (or trusted). */
static void on_headers(void *obj, http_exchange *ex, const http_head *head)
{
    request *req = obj;
    req->method = head->method;
    req->path = head->path;
    set_request_id(req);
    note_client(req, ex);
    http_exchange_body_deadline(ex, req->request_id);
    if (head->over_limit) {
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_OVERLOADED, "too many open connections");
        answer(req);
        return;
    }
    if (head->over_client_limit) {
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_TOO_MANY_CONNECTIONS,
                    "this client has --max-connections-per-client connections open");
        answer(req);
        return;
    }
    if (!size_limits_or_reply(req, head)) {
        answer(req);
        return;
    }
    http_field headers[MAX_FIELDS];
    size_t n;
    http_exchange_headers(ex, headers, MAX_FIELDS, &n);
    edge_verdict framing;
    if (!edge_check_framing(headers, n, &framing)) {
        /* where the message ends is in doubt: the bytes after the headers are never read */
        reply_verdict(req, &framing);
        answer(req);
        return;
    }
    if (expects_continue(req)) {
        db_thread_failure_reset();
        admit(req);
        store_thread_done(req->app->store); /* the auth lookup's reader goes back */
        if (req->status)
            answer(req);
    }
}

static bool on_body(void *obj, http_exchange *ex, const char *body, size_t len, bool too_large)
{
    (void)ex;
    request *req = obj;
    req->bytes_in = (int64_t)len;
    db_thread_failure_reset();
    store_request_begin(req->app->store);
    bool waiting = dispatch(req, body, len, too_large);
    /* a reader taken on this thread goes back to the pool: the budget is per request */
    store_thread_done(req->app->store);
    if (!waiting)
        answer(req);
    return waiting;
}

static void on_completed(void *obj, http_exchange *ex)
{
    request *req = obj;
    app *a = req->app;
    if (req->runner) /* it waited: its answer is sent (or its client left), so shutdown may go on */
        atomic_fetch_sub(&a->in_flight, 1);
    in_progress_release(req);
    if (http_exchange_timed_out(ex))
        req->status = 408; /* the guard answered */
    else if (!req->status) /* libmicrohttpd answered this one itself (framing, headers too large) */
        req->status = http_exchange_library_status(ex);
    if (!req->request_id[0])
        set_request_id(req);
    if (!req->client_ip[0]) /* refused before its headers were read */
        http_exchange_peer_address(ex, req->client_ip, sizeof req->client_ip);
    int64_t us = (monotonic_ns() - req->start_ns) / 1000;
    if (req->status) /* 0: the client left before any answer; nothing was served */
        metrics_observe_request(a->metrics, req->route ? req->route->name : "unmatched",
                                req->method, req->status, (double)us / 1000);
    if (a->cfg.access_log)
        access_log(req, us);
    request_free(req);
}

int pipeline_start(app *a, char *err, size_t errlen)
{
    a->workers = worker_pool_start((int)a->cfg.workers);
    a->keys_in_progress = holder_count_new();
    if (a->cfg.access_log)
        access_log_start();
    http_limits limits = {
        .threads = (int)a->cfg.threads,
        .idle_timeout_ms = a->cfg.idle_timeout_ms,
        .max_header_bytes = a->cfg.max_header_bytes,
        .max_body = MAX_REQUEST_BODY,
        .max_query_args = MAX_QUERY_ARGS,
        .guard = {.header_timeout_ms = a->cfg.header_timeout_ms,
                  .body_timeout_ms = a->cfg.body_timeout_ms,
                  .request_timeout_ms = a->cfg.request_timeout_ms,
                  .max_connections = a->cfg.max_connections,
                  .max_connections_per_client = a->cfg.max_connections_per_client},
        .trusted_proxies = a->cfg.trust_proxy,
    };
    http_handlers handlers = {.ctx = a,
                              .request_line = on_request_line,
                              .headers = on_headers,
                              .body = on_body,
                              .completed = on_completed,
                              .message = http_log_library_message};
    a->http =
        http_server_start(a->cfg.listen, sizeof a->cfg.listen, &limits, &handlers, err, errlen);
    if (!a->http) {
        holder_count_free(a->keys_in_progress);
        a->keys_in_progress = NULL;
        worker_pool_stop(a->workers);
        a->workers = NULL;
        access_log_stop();
        return -1;
    }
    return 0;
}

void pipeline_stop(app *a)
{
    if (!a->http)
        return;
    atomic_store(&a->shutting_down, true);
    http_server_quiesce(a->http);
    int64_t deadline = monotonic_ns() + a->cfg.shutdown_timeout_ms * 1000000;
    while (atomic_load(&a->in_flight) > 0 && monotonic_ns() < deadline) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* A request still waiting has a write job queued or a worker busy for it (a processor call,
     * bounded by --processor-timeout; a job, on a database that may not answer at all): when
     * that ends, its next step runs and resumes the connection, so the workers and the server
     * must outlive it. Past the deadline it is waited for until the stop's own deadline
     * (stop_deadline_arm, main.c) ends the process: its key stays claimed for a retry. */
    if (atomic_load(&a->in_flight) > 0) {
        jsonw w;
        log_begin(&w, "warn", "requests still waiting past --shutdown-timeout");
        jw_key(&w, "requests");
        jw_int(&w, atomic_load(&a->in_flight));
        log_end(&w);
        while (atomic_load(&a->in_flight) > 0) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    /* requests answered on the HTTP threads meanwhile (503 shutting_down among them) get a
     * moment to be sent; those that waited were counted until theirs was */
    struct timespec ts = {0, 100 * 1000 * 1000};
    worker_pool_stop(a->workers); /* runs anything still queued, so nothing is left half-done */
    a->workers = NULL;
    nanosleep(&ts, NULL);
    http_server_stop(a->http); /* every request has ended, and its connection guard */
    a->http = NULL;
    holder_count_free(a->keys_in_progress); /* every request gave its place back */
    a->keys_in_progress = NULL;
    access_log_stop(); /* every request has ended: its line is written now */
}

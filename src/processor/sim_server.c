/* `payd processor-sim`: the simulated processor of §5 served over HTTP, for running payd with
 * `--processor http://HOST:PORT` against a processor that can be slowed down, broken and
 * restarted on its own. The charging logic is the simulator's; this file only speaks HTTP.
 *
 * It is served by payd's own HTTP layer (http/server.h). Each request is answered on a thread of
 * its own, its exchange suspended meanwhile: the simulator blocks on its latency sleeps and on
 * store_write, which would stall every other connection on the event loop's thread. */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "http/server.h"
#include "node/signals.h"
#include "processor/http_processor.h"
#include "processor/simulator.h"
#include "store/store.h"

#define MAX_BODY_BYTES (64 * 1024)
#define SLOW_TOKEN_MS  2000 /* tok_slow answers after this; the caller's own timeout decides */

/* How a recorded charge or refund loses its answer. A dropped connection is what a crash looks
 * like, but an HTTP client may resend on a reused connection that died before answering (libcurl
 * does, once) and then hear the deduplicated result: tests that need the doubt seen use 500. */
typedef enum { LOSE_BY_EITHER, LOSE_BY_500, LOSE_BY_DROP } lose_mode;

typedef struct sim_server {
    store *store;
    sim_faults faults;
    /* chooses between a 500 and a dropped connection when an answer is lost */
    pthread_mutex_t dice_lock;
    unsigned dice;
    lose_mode lose_by;
    /* charge and refund requests being answered now, and the most at once since start (GET
     * /concurrency): how a test sees whether payd's calls overlapped */
    atomic_int held[2], most_held[2]; /* [CHARGE], [REFUND] */
    /* requests handed to a thread of their own and not yet completed (answered and sent, or
     * left by their client): the server stops only when none is left, and once it is stopping
     * takes no more (a request on a connection still open is answered 503 at once) */
    pthread_mutex_t threads_lock;
    pthread_cond_t threads_done;
    int threaded_requests;
    bool stopping;
} sim_server;

/* One request, as read on its connection's thread and then answered on a thread of its own. */
typedef struct sim_request {
    sim_server *srv;
    http_exchange *ex;
    char *method, *path, *key, *query_key; /* key: the Idempotency-Key header */
    const char *body;                      /* the exchange's, which outlives the answer */
    size_t len;
    bool too_large;
    bool threaded; /* counted in srv->threaded_requests until it completes */
} sim_request;

/* An answer: a status and a JSON body, or a connection closed without a word. */
typedef struct sim_answer {
    int status;
    char *body;
    bool drop;
} sim_answer;

/* ---- answers ---- */

static sim_answer reply(int status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return (sim_answer){.drop = true}; /* out of memory: as a crash would */
    return (sim_answer){.status = status, .body = text};
}

static sim_answer reply_error(int status, const char *code, const char *message)
{
    return reply(status, json_pack("{s:s, s:s}", "error", code, "message", message));
}

static json_t *charge_json(const proc_result *r)
{
    json_t *j = json_pack("{s:s, s:s}", "id", r->id, "status",
                          r->status != PROC_APPROVED ? "declined"
                          : r->authorized            ? "authorized"
                                                     : "succeeded");
    if (j && r->status == PROC_DECLINED && r->decline_code[0])
        json_object_set_new(j, "decline_code", json_string(r->decline_code));
    return j;
}

static bool refund_exists(store *s, const char *key)
{
    db_conn *db = store_reader(s);
    if (!db)
        return false;
    db_stmt *st =
        db_query(db, "SELECT 1 FROM processor_refunds WHERE processor_key = $1", "s", key);
    bool found = db_step(st) == DB_ROW;
    db_done(st);
    return found;
}

/* The simulator said "unavailable". When nothing was recorded that is a plain 5xx (down, or
 * --fail-before). When the charge or refund was recorded its answer is being lost
 * (--fail-after, tok_lostResponse): half the time as a 500, half the time by closing the
 * connection without a word, which the client cannot tell from a crash of the processor. */
static sim_answer lose_answer(sim_server *srv, bool recorded)
{
    if (recorded && srv->lose_by != LOSE_BY_500) {
        pthread_mutex_lock(&srv->dice_lock);
        bool drop = srv->lose_by == LOSE_BY_DROP || rand_r(&srv->dice) % 2 == 0;
        pthread_mutex_unlock(&srv->dice_lock);
        if (drop)
            return (sim_answer){.drop = true};
    }
    return reply_error(500, "processor_unavailable", "the processor failed; retry");
}

/* ---- the protocol ---- */

enum { CHARGE, REFUND };

static void call_arrived(sim_server *srv, int kind)
{
    int now = atomic_fetch_add(&srv->held[kind], 1) + 1;
    int most = atomic_load(&srv->most_held[kind]);
    while (now > most && !atomic_compare_exchange_weak(&srv->most_held[kind], &most, now))
        ;
}

static sim_answer post_charge(sim_server *srv, const char *key, json_t *body)
{
    json_t *amount = json_object_get(body, "amount");
    const char *currency = json_string_value(json_object_get(body, "currency"));
    const char *source = json_string_value(json_object_get(body, "source"));
    json_t *capture = json_object_get(body, "capture"); /* false: a hold (§17) */
    if (!json_is_integer(amount) || !currency || !source || (capture && !json_is_boolean(capture)))
        return reply_error(400, "invalid_request",
                           "send {\"amount\": int, \"currency\": string, \"source\": string, "
                           "\"capture\"?: bool}");
    proc_result r =
        sim_charge_hold(srv->store, &srv->faults, SLOW_TOKEN_MS, key, json_integer_value(amount),
                        currency, source, capture && json_is_false(capture));
    if (r.status == PROC_UNAVAILABLE) {
        proc_result found = sim_find_charge(srv->store, key);
        return lose_answer(srv, found.status == PROC_APPROVED || found.status == PROC_DECLINED);
    }
    return reply(200, charge_json(&r));
}

static sim_answer get_charge(sim_server *srv, const char *key)
{
    if (!key || !*key)
        return reply_error(400, "invalid_request", "send ?idempotency_key=K");
    proc_result r = sim_find_charge(srv->store, key);
    if (r.status == PROC_NOT_FOUND)
        return reply_error(404, "not_found", "no charge under this idempotency key");
    if (r.status == PROC_UNAVAILABLE)
        return reply_error(500, "processor_unavailable", "cannot read the charges");
    return reply(200, charge_json(&r));
}

/* GET /charges/{id}: the charge by its own id, with what was refunded from it (voids apart),
 * for `payd ledger verify --processor URL` (docs/ledger.md). */
static sim_answer get_charge_by_id(sim_server *srv, const char *charge_id)
{
    db_conn *db = store_reader(srv->store);
    if (!db)
        return reply_error(500, "processor_unavailable", "cannot read the charges");
    db_stmt *st = db_query(db,
                           "SELECT c.status, c.amount, (SELECT COALESCE(SUM(r.amount), 0) FROM "
                           "processor_refunds r WHERE r.charge_id = c.charge_id AND "
                           "r.processor_key NOT LIKE '%:void'), (SELECT COUNT(*) FROM "
                           "processor_refunds r WHERE r.charge_id = c.charge_id AND "
                           "r.processor_key LIKE '%:void'), c.captured, c.released, "
                           "(SELECT COUNT(*) FROM processor_captures k WHERE k.charge_id = "
                           "c.charge_id AND k.amount > 0), (SELECT COUNT(*) FROM "
                           "processor_captures k WHERE k.charge_id = c.charge_id AND k.amount = 0) "
                           "FROM processor_charges c WHERE c.charge_id = $1",
                           "s", charge_id);
    db_status rc = db_step(st);
    const char *status = rc != DB_ROW                            ? ""
                         : !strcmp(db_text(st, 0), "succeeded")  ? "succeeded"
                         : !strcmp(db_text(st, 0), "authorized") ? "authorized"
                                                                 : "declined";
    /* a hold (§17) shows what was captured and released of it, and how many captures and
     * releases made that */
    sim_answer a =
        rc == DB_ROW
            ? reply(200,
                    json_pack("{s:s, s:s, s:I, s:I, s:b, s:I, s:I, s:I, s:I}", "id", charge_id,
                              "status", status, "amount", (json_int_t)db_int(st, 1), "refunded",
                              (json_int_t)db_int(st, 2), "voided", db_int(st, 3) > 0, "captured",
                              (json_int_t)db_int(st, 4), "released", (json_int_t)db_int(st, 5),
                              "captures", (json_int_t)db_int(st, 6), "releases",
                              (json_int_t)db_int(st, 7)))
        : rc == DB_DONE ? reply_error(404, "not_found", "no such charge")
                        : reply_error(500, "processor_unavailable", "cannot read the charges");
    db_done(st);
    return a; /* the thread's reader goes back when the request ends */
}

static sim_answer post_refund(sim_server *srv, const char *key, json_t *body)
{
    json_t *amount = json_object_get(body, "amount");
    const char *charge_id = json_string_value(json_object_get(body, "charge_id"));
    if (!json_is_integer(amount) || !charge_id)
        return reply_error(400, "invalid_request", "send {\"charge_id\": string, \"amount\": int}");
    proc_result r =
        sim_refund(srv->store, &srv->faults, key, charge_id, json_integer_value(amount));
    if (r.status == PROC_UNAVAILABLE)
        return lose_answer(srv, refund_exists(srv->store, key));
    return reply(200, json_pack("{s:s, s:s}", "id", r.id, "status", "succeeded"));
}

/* POST /charges/{id}/capture {amount, final?, release?} and POST /charges/{id}/release
 * {amount?} (§17): a final capture releases `release` of the hold, or all that remains when
 * it is absent; a release without an amount releases all that remains. */
static sim_answer post_hold_op(sim_server *srv, const char *key, const char *charge_id,
                               bool capture, json_t *body)
{
    json_t *amount = json_object_get(body, "amount");
    json_t *final = json_object_get(body, "final");
    json_t *release = json_object_get(body, "release");
    if ((capture && !json_is_integer(amount)) || (amount && !json_is_integer(amount)) ||
        (final && !json_is_boolean(final)) || (release && !json_is_integer(release)))
        return reply_error(400, "invalid_request",
                           capture ? "send {\"amount\": int, \"final\"?: bool, \"release\"?: int}"
                                   : "send {\"amount\"?: int}");
    int64_t n = amount ? json_integer_value(amount) : -1;
    proc_result r =
        capture
            ? sim_hold_op(srv->store, &srv->faults, key, charge_id, n,
                          json_is_true(final) ? (release ? json_integer_value(release) : -1) : 0)
            : sim_hold_op(srv->store, &srv->faults, key, charge_id, 0, n);
    if (r.status == PROC_UNAVAILABLE)
        return lose_answer(srv, sim_hold_op_exists(srv->store, key));
    if (r.status == PROC_NOT_FOUND)
        return reply_error(404, "not_found", "no hold with this id");
    if (r.status == PROC_DECLINED)
        return reply_error(409, "hold_exceeded", "this would take more than the hold holds");
    return reply(200, json_pack("{s:s, s:s}", "id", r.id, "status", "succeeded"));
}

static sim_answer get_concurrency(sim_server *srv)
{
    return reply(200, json_pack("{s:i, s:i, s:i, s:i}", "charges_in_flight",
                                atomic_load(&srv->held[CHARGE]), "most_charges_in_flight",
                                atomic_load(&srv->most_held[CHARGE]), "refunds_in_flight",
                                atomic_load(&srv->held[REFUND]), "most_refunds_in_flight",
                                atomic_load(&srv->most_held[REFUND])));
}

static sim_answer get_stats(void)
{
    int64_t charges, refunds, deduplicated, captures, releases;
    sim_stats(&charges, &refunds, &deduplicated);
    sim_hold_stats(&captures, &releases);
    return reply(200,
                 json_pack("{s:I, s:I, s:I, s:I, s:I}", "charges", (json_int_t)charges, "refunds",
                           (json_int_t)refunds, "deduplicated", (json_int_t)deduplicated,
                           "captures", (json_int_t)captures, "releases", (json_int_t)releases));
}

/* Checks the key and the body common to both POSTs, then runs the operation. */
static sim_answer post(sim_server *srv, const sim_request *rq, bool charge,
                       const char *hold_op /* "capture" or "release" of charge_id */,
                       const char *charge_id)
{
    if (!rq->key || !*rq->key)
        return reply_error(400, "idempotency_key_missing", "send an Idempotency-Key header");
    if (rq->too_large)
        return reply_error(413, "payload_too_large", "the body exceeds 64 KiB");
    json_t *body = json_loadb(rq->body ? rq->body : "", rq->len, 0, NULL);
    if (!json_is_object(body)) {
        json_decref(body);
        return reply_error(400, "invalid_json", "the body must be a JSON object");
    }
    int kind = charge ? CHARGE : REFUND;
    call_arrived(srv, kind);
    sim_answer a = hold_op
                       ? post_hold_op(srv, rq->key, charge_id, !strcmp(hold_op, "capture"), body)
                   : charge ? post_charge(srv, rq->key, body)
                            : post_refund(srv, rq->key, body);
    atomic_fetch_sub(&srv->held[kind], 1);
    json_decref(body);
    return a;
}

/* "{id}/capture" or "{id}/release" with an id of at most 64 characters */
static bool hold_op_path(const char *rest)
{
    const char *slash = strchr(rest, '/');
    return slash && slash > rest && slash - rest <= 64 &&
           (!strcmp(slash + 1, "capture") || !strcmp(slash + 1, "release"));
}

static sim_answer route(sim_server *srv, const sim_request *rq)
{
    bool is_get = !strcmp(rq->method, "GET"), is_post = !strcmp(rq->method, "POST");
    const char *path = rq->path;
    if (!strcmp(path, "/charges")) {
        if (is_post)
            return post(srv, rq, true, NULL, NULL);
        if (is_get)
            return get_charge(srv, rq->query_key);
    } else if (!strcmp(path, "/refunds")) {
        if (is_post)
            return post(srv, rq, false, NULL, NULL);
    } else if (!strncmp(path, "/charges/", 9) && path[9] && !strchr(path + 9, '/')) {
        if (is_get)
            return get_charge_by_id(srv, path + 9);
    } else if (!strncmp(path, "/charges/", 9) && hold_op_path(path + 9)) {
        char charge_id[65];
        const char *slash = strchr(path + 9, '/');
        snprintf(charge_id, sizeof charge_id, "%.*s", (int)(slash - (path + 9)), path + 9);
        if (is_post)
            return post(srv, rq, true, slash + 1, charge_id);
    } else if (!strcmp(path, "/stats")) {
        if (is_get)
            return get_stats();
    } else if (!strcmp(path, "/concurrency")) {
        if (is_get)
            return get_concurrency(srv);
    } else {
        return reply_error(404, "route_not_found", "no route matches this path");
    }
    return reply_error(405, "method_not_allowed", "this path does not accept that method");
}

/* ---- serving: payd's HTTP layer, a thread per request ---- */

static const http_header json_headers[] = {{"Content-Type", "application/json"}};

static void give_answer(http_exchange *ex, sim_answer a)
{
    if (a.drop) {
        http_exchange_drop(ex);
        return;
    }
    http_exchange_respond(ex, &(http_response){.status = a.status,
                                               .body = a.body,
                                               .len = strlen(a.body),
                                               .headers = json_headers,
                                               .header_count = 1});
}

static void threaded_request_completed(sim_server *srv)
{
    pthread_mutex_lock(&srv->threads_lock);
    if (--srv->threaded_requests == 0)
        pthread_cond_broadcast(&srv->threads_done);
    pthread_mutex_unlock(&srv->threads_lock);
}

static void *answer_request(void *arg)
{
    sim_request *rq = arg;
    sim_server *srv = rq->srv;
    http_exchange *ex = rq->ex;
    give_answer(ex, route(srv, rq));
    /* the store keeps a reader per thread, and this thread ends here */
    store_release_reader(srv->store);
    http_exchange_resume(ex); /* rq may be freed from here on */
    return NULL;
}

static void *on_request_line(void *ctx, http_exchange *ex)
{
    sim_request *rq = calloc(1, sizeof *rq);
    if (rq) {
        rq->srv = ctx;
        rq->ex = ex;
    }
    return rq;
}

static void on_headers(void *req, http_exchange *ex, const http_head *head)
{
    sim_request *rq = req;
    http_exchange_body_deadline(ex, "");
    if (!rq) {
        give_answer(ex, reply_error(503, "overloaded", "out of memory"));
        return;
    }
    if (head->over_limit) {
        give_answer(ex, reply_error(503, "overloaded", "too many connections"));
        return;
    }
    rq->method = strdup(head->method);
    rq->path = strdup(head->path);
}

static bool on_body(void *req, http_exchange *ex, const char *body, size_t len, bool too_large)
{
    sim_request *rq = req;
    sim_server *srv = rq->srv;
    const char *key = http_exchange_header(ex, "Idempotency-Key");
    const char *query_key = http_exchange_query(ex, "idempotency_key");
    rq->key = key ? strdup(key) : NULL;
    rq->query_key = query_key ? strdup(query_key) : NULL;
    rq->body = body;
    rq->len = len;
    rq->too_large = too_large;
    pthread_mutex_lock(&srv->threads_lock);
    bool stopping = srv->stopping;
    srv->threaded_requests += !stopping;
    pthread_mutex_unlock(&srv->threads_lock);
    rq->threaded = !stopping;
    if (stopping) {
        give_answer(ex, reply_error(503, "shutting_down", "the processor is stopping"));
        return false;
    }
    http_exchange_suspend(ex);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t thread;
    bool started = pthread_create(&thread, &attr, answer_request, rq) == 0;
    pthread_attr_destroy(&attr);
    if (!started) {
        give_answer(ex, reply_error(503, "overloaded", "cannot start a thread for the request"));
        http_exchange_resume(ex);
    }
    return true;
}

static void on_completed(void *req, http_exchange *ex)
{
    (void)ex;
    sim_request *rq = req;
    if (!rq)
        return;
    if (rq->threaded)
        threaded_request_completed(rq->srv);
    free(rq->method);
    free(rq->path);
    free(rq->key);
    free(rq->query_key);
    free(rq);
}

/* ---- the command line ---- */

static void sim_usage(void)
{
    fprintf(
        stderr,
        "usage: payd processor-sim [--listen HOST:PORT] [--db PATH] [--latency-ms N]\n"
        "                          [--fail-before P] [--fail-after P] [--lose-by M] [--seed N]\n\n"
        "  --listen HOST:PORT  address to serve on (default 127.0.0.1:9090)\n"
        "  --db PATH           the simulator's own database file (default "
        "./processor-sim.db)\n"
        "  --latency-ms N      wait this long before every charge and refund\n"
        "  --fail-before P     probability of a 500 without charging\n"
        "  --fail-after P      probability of charging, then a 500 or a dropped connection\n"
        "  --lose-by M         how --fail-after loses answers: either (default), 500 or drop\n"
        "  --seed N            seed for the fault dice (default: the time)\n\n"
        "Besides the protocol: GET /stats (charges, refunds, deduplicated since start) and\n"
        "GET /concurrency (charge and refund requests being answered now, and the most at "
        "once).\n");
}

static bool parse_probability(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !(v >= 0 && v <= 1))
        return false;
    *out = v;
    return true;
}

static bool parse_count(const char *s, long long max, long long *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || v < 0 || v > max)
        return false;
    *out = v;
    return true;
}

typedef struct sim_options {
    const char *listen, *db;
    sim_faults faults;
    lose_mode lose_by;
} sim_options;

/* 0: run; 1: help was printed; 2: usage error (printed). */
static int parse_args(int argc, char **argv, sim_options *o)
{
    *o = (sim_options){.listen = "127.0.0.1:9090", .db = "./processor-sim.db"};
    for (int i = 0; i < argc; i++) {
        const char *name = argv[i];
        if (!strcmp(name, "--help") || !strcmp(name, "-h")) {
            sim_usage();
            return 1;
        }
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!value) {
            fprintf(stderr, "payd processor-sim: %s needs a value\n", name);
            return 2;
        }
        i++;
        long long n;
        bool ok = true;
        if (!strcmp(name, "--listen")) {
            o->listen = value;
            char err[256];
            if (!http_listen_address_valid(value, err, sizeof err)) {
                fprintf(stderr, "payd processor-sim: %s\n", err);
                return 2;
            }
        } else if (!strcmp(name, "--db")) {
            o->db = value;
        } else if (!strcmp(name, "--latency-ms")) {
            ok = parse_count(value, 24LL * 3600 * 1000, &n);
            o->faults.latency_ms = n;
        } else if (!strcmp(name, "--fail-before")) {
            ok = parse_probability(value, &o->faults.fail_before);
        } else if (!strcmp(name, "--fail-after")) {
            ok = parse_probability(value, &o->faults.fail_after);
        } else if (!strcmp(name, "--lose-by")) {
            ok = !strcmp(value, "either") || !strcmp(value, "500") || !strcmp(value, "drop");
            o->lose_by = !strcmp(value, "500")    ? LOSE_BY_500
                         : !strcmp(value, "drop") ? LOSE_BY_DROP
                                                  : LOSE_BY_EITHER;
        } else if (!strcmp(name, "--seed")) {
            ok = parse_count(value, 0xffffffffLL, &n);
            o->faults.seed = (unsigned)n;
        } else {
            fprintf(stderr, "payd processor-sim: unknown flag '%s'\n", name);
            sim_usage();
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "payd processor-sim: bad value '%s' for %s\n", value, name);
            return 2;
        }
    }
    return 0;
}

/* A probability as a JSON number: the flags hold it in [0, 1], so it is always finite; 17 digits
 * give back the very double (as jansson writes reals). */
static void write_probability(jsonw *w, double p)
{
    char text[32];
    snprintf(text, sizeof text, "%.17g", p);
    jw_raw(w, text, "0");
}

static void log_listening(const sim_options *o, const char *listening_on)
{
    jsonw w;
    log_begin(&w, "info", "processor-sim listening");
    jw_key(&w, "listen");
    jw_string(&w, listening_on);
    jw_key(&w, "db");
    jw_string(&w, o->db);
    jw_key(&w, "latency_ms");
    jw_int(&w, o->faults.latency_ms);
    jw_key(&w, "fail_before");
    write_probability(&w, o->faults.fail_before);
    jw_key(&w, "fail_after");
    write_probability(&w, o->faults.fail_after);
    jw_key(&w, "seed");
    jw_int(&w, o->faults.seed);
    log_end(&w);
}

int processor_sim_main(int argc, char **argv)
{
    sim_options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    /* a private SQLite file: the simulator opens many connections, which :memory: cannot share */
    if (strstr(o.db, ":memory:")) {
        fprintf(stderr, "payd processor-sim: --db must be a file, not :memory:\n");
        return 2;
    }

    sigset_t stop_signals;
    stop_signals_block(&stop_signals);

    static sim_server srv; /* outlives every request thread */
    srv.faults = o.faults;
    srv.lose_by = o.lose_by;
    srv.dice = o.faults.seed ? o.faults.seed ^ 0x9e3779b9u : (unsigned)time(NULL);
    pthread_mutex_init(&srv.dice_lock, NULL);
    pthread_mutex_init(&srv.threads_lock, NULL);
    pthread_cond_init(&srv.threads_done, NULL);
    char err[512];
    store_options opt = {.url = o.db, .max_batch = 256, .writer_conns = 1};
    srv.store = store_open(&opt, err, sizeof err);
    if (!srv.store) {
        fprintf(stderr, "payd processor-sim: %s\n", err);
        return 1;
    }
    /* GET /charges/{id} looks a charge and its refunds up by the charge's id */
    db_conn *setup = store_reader(srv.store);
    if (setup) {
        db_exec_script(setup, "CREATE INDEX IF NOT EXISTS processor_charges_by_id "
                              "ON processor_charges (charge_id)");
        db_exec_script(setup, "CREATE INDEX IF NOT EXISTS processor_refunds_by_charge "
                              "ON processor_refunds (charge_id)");
        store_release_reader(srv.store);
    }

    http_handlers handlers = {.ctx = &srv,
                              .request_line = on_request_line,
                              .headers = on_headers,
                              .body = on_body,
                              .completed = on_completed,
                              .message = http_log_library_message};
    http_limits limits = {.threads = 1,
                          .idle_timeout_ms = 60000,
                          .max_header_bytes = 8192,
                          .max_body = MAX_BODY_BYTES,
                          .max_query_args = 16,
                          .guard = {.header_timeout_ms = 30000,
                                    .body_timeout_ms = 30000,
                                    .request_timeout_ms = 60000,
                                    .max_connections = 4096}};
    char listen_on[160];
    snprintf(listen_on, sizeof listen_on, "%s", o.listen);
    http_server *server =
        http_server_start(listen_on, sizeof listen_on, &limits, &handlers, err, sizeof err);
    if (!server) {
        fprintf(stderr, "payd processor-sim: %s\n", err);
        store_close(srv.store);
        return 1;
    }
    log_listening(&o, listen_on);

    int sig = stop_signals_wait(&stop_signals);
    jsonw line;
    log_begin(&line, "info", "processor-sim stopping");
    jw_key(&line, "signal");
    jw_int(&line, sig);
    log_end(&line);
    http_server_quiesce(server);
    pthread_mutex_lock(&srv.threads_lock); /* every request in a thread is answered and sent */
    srv.stopping = true;
    while (srv.threaded_requests > 0)
        pthread_cond_wait(&srv.threads_done, &srv.threads_lock);
    pthread_mutex_unlock(&srv.threads_lock);
    http_server_stop(server);
    store_close(srv.store);
    pthread_mutex_destroy(&srv.dice_lock);
    return 0;
}

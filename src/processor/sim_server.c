/* `payd processor-sim`: the simulated processor of §5 served over HTTP, for running payd with
 * `--processor http://HOST:PORT` against a processor that can be slowed down, broken and
 * restarted on its own. The charging logic is the simulator's; this file only speaks HTTP.
 *
 * Each connection has a thread of its own: the simulator blocks on its latency sleeps and on
 * store_write, which would stall every other connection on a shared event loop. */
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
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
} sim_server;

/* One request's body, gathered over the access handler's calls. */
typedef struct sim_request {
    char *body;
    size_t len;
    bool too_large;
} sim_request;

/* ---- answers ---- */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, json_t *body)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!text)
        return MHD_NO;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result reply_error(struct MHD_Connection *conn, unsigned status, const char *code,
                                   const char *message)
{
    return reply(conn, status, json_pack("{s:s, s:s}", "error", code, "message", message));
}

static json_t *charge_json(const proc_result *r)
{
    json_t *j = json_pack("{s:s, s:s}", "id", r->id, "status",
                          r->status == PROC_APPROVED ? "succeeded" : "declined");
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
 * connection without a word, which the client cannot tell from a crash of the processor.
 * Returning MHD_NO from the access handler is what closes it. */
static enum MHD_Result lose_answer(sim_server *srv, struct MHD_Connection *conn, bool recorded)
{
    if (recorded && srv->lose_by != LOSE_BY_500) {
        pthread_mutex_lock(&srv->dice_lock);
        bool drop = srv->lose_by == LOSE_BY_DROP || rand_r(&srv->dice) % 2 == 0;
        pthread_mutex_unlock(&srv->dice_lock);
        if (drop)
            return MHD_NO;
    }
    return reply_error(conn, 500, "processor_unavailable", "the processor failed; retry");
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

static enum MHD_Result post_charge(sim_server *srv, struct MHD_Connection *conn, const char *key,
                                   json_t *body)
{
    json_t *amount = json_object_get(body, "amount");
    const char *currency = json_string_value(json_object_get(body, "currency"));
    const char *source = json_string_value(json_object_get(body, "source"));
    if (!json_is_integer(amount) || !currency || !source)
        return reply_error(conn, 400, "invalid_request",
                           "send {\"amount\": int, \"currency\": string, \"source\": string}");
    proc_result r = sim_charge(srv->store, &srv->faults, SLOW_TOKEN_MS, key,
                               json_integer_value(amount), currency, source);
    if (r.status == PROC_UNAVAILABLE) {
        proc_result found = sim_find_charge(srv->store, key);
        return lose_answer(srv, conn,
                           found.status == PROC_APPROVED || found.status == PROC_DECLINED);
    }
    return reply(conn, 200, charge_json(&r));
}

static enum MHD_Result get_charge(sim_server *srv, struct MHD_Connection *conn)
{
    const char *key = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "idempotency_key");
    if (!key || !*key)
        return reply_error(conn, 400, "invalid_request", "send ?idempotency_key=K");
    proc_result r = sim_find_charge(srv->store, key);
    if (r.status == PROC_NOT_FOUND)
        return reply_error(conn, 404, "not_found", "no charge under this idempotency key");
    if (r.status == PROC_UNAVAILABLE)
        return reply_error(conn, 500, "processor_unavailable", "cannot read the charges");
    return reply(conn, 200, charge_json(&r));
}

static enum MHD_Result post_refund(sim_server *srv, struct MHD_Connection *conn, const char *key,
                                   json_t *body)
{
    json_t *amount = json_object_get(body, "amount");
    const char *charge_id = json_string_value(json_object_get(body, "charge_id"));
    if (!json_is_integer(amount) || !charge_id)
        return reply_error(conn, 400, "invalid_request",
                           "send {\"charge_id\": string, \"amount\": int}");
    proc_result r =
        sim_refund(srv->store, &srv->faults, key, charge_id, json_integer_value(amount));
    if (r.status == PROC_UNAVAILABLE)
        return lose_answer(srv, conn, refund_exists(srv->store, key));
    return reply(conn, 200, json_pack("{s:s, s:s}", "id", r.id, "status", "succeeded"));
}

static enum MHD_Result get_concurrency(sim_server *srv, struct MHD_Connection *conn)
{
    return reply(conn, 200,
                 json_pack("{s:i, s:i, s:i, s:i}", "charges_in_flight",
                           atomic_load(&srv->held[CHARGE]), "most_charges_in_flight",
                           atomic_load(&srv->most_held[CHARGE]), "refunds_in_flight",
                           atomic_load(&srv->held[REFUND]), "most_refunds_in_flight",
                           atomic_load(&srv->most_held[REFUND])));
}

static enum MHD_Result get_stats(struct MHD_Connection *conn)
{
    int64_t charges, refunds, deduplicated;
    sim_stats(&charges, &refunds, &deduplicated);
    return reply(conn, 200,
                 json_pack("{s:I, s:I, s:I}", "charges", (json_int_t)charges, "refunds",
                           (json_int_t)refunds, "deduplicated", (json_int_t)deduplicated));
}

/* Checks the key and the body common to both POSTs, then runs the operation. */
static enum MHD_Result post(sim_server *srv, struct MHD_Connection *conn, sim_request *rq,
                            bool charge)
{
    const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Idempotency-Key");
    if (!key || !*key)
        return reply_error(conn, 400, "idempotency_key_missing", "send an Idempotency-Key header");
    if (rq->too_large)
        return reply_error(conn, 413, "payload_too_large", "the body exceeds 64 KiB");
    json_t *body = json_loadb(rq->body ? rq->body : "", rq->len, 0, NULL);
    if (!json_is_object(body)) {
        json_decref(body);
        return reply_error(conn, 400, "invalid_json", "the body must be a JSON object");
    }
    int kind = charge ? CHARGE : REFUND;
    call_arrived(srv, kind);
    enum MHD_Result rc =
        charge ? post_charge(srv, conn, key, body) : post_refund(srv, conn, key, body);
    atomic_fetch_sub(&srv->held[kind], 1);
    json_decref(body);
    return rc;
}

static enum MHD_Result route(sim_server *srv, struct MHD_Connection *conn, const char *url,
                             const char *method, sim_request *rq)
{
    bool is_get = !strcmp(method, "GET"), is_post = !strcmp(method, "POST");
    if (!strcmp(url, "/charges")) {
        if (is_post)
            return post(srv, conn, rq, true);
        if (is_get)
            return get_charge(srv, conn);
    } else if (!strcmp(url, "/refunds")) {
        if (is_post)
            return post(srv, conn, rq, false);
    } else if (!strcmp(url, "/stats")) {
        if (is_get)
            return get_stats(conn);
    } else if (!strcmp(url, "/concurrency")) {
        if (is_get)
            return get_concurrency(srv, conn);
    } else {
        return reply_error(conn, 404, "route_not_found", "no route matches this path");
    }
    return reply_error(conn, 405, "method_not_allowed", "this path does not accept that method");
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    sim_request *rq = *con_cls;
    if (!rq) {
        /* First call: headers only. Answering now would make libmicrohttpd close the
         * connection, so the answer waits for a later call. */
        rq = calloc(1, sizeof *rq);
        if (!rq)
            return MHD_NO;
        *con_cls = rq;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (rq->too_large || rq->len + n > MAX_BODY_BYTES) {
            rq->too_large = true;
            return MHD_YES;
        }
        char *grown = realloc(rq->body, rq->len + n + 1);
        if (!grown)
            return MHD_NO;
        rq->body = grown;
        memcpy(rq->body + rq->len, upload_data, n);
        rq->len += n;
        rq->body[rq->len] = '\0';
        return MHD_YES;
    }
    sim_server *srv = cls;
    enum MHD_Result rc = route(srv, conn, url, method, rq);
    /* Connection threads end, and libmicrohttpd reports a closed connection on its own thread,
     * not the connection's: give back a reader this request opened while still on its thread,
     * or the store (which holds only so many) would keep it until it closes. */
    store_release_reader(srv->store);
    return rc;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    sim_request *rq = *con_cls;
    if (!rq)
        return;
    free(rq->body);
    free(rq);
    *con_cls = NULL;
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

static bool parse_listen(const char *listen, struct sockaddr_in *addr)
{
    char host[128];
    if (snprintf(host, sizeof host, "%s", listen) >= (int)sizeof host)
        return false;
    char *colon = strrchr(host, ':');
    if (!colon)
        return false;
    *colon = '\0';
    long long port;
    if (!parse_count(colon + 1, 65535, &port))
        return false;
    *addr = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    return inet_pton(AF_INET, host[0] ? host : "0.0.0.0", &addr->sin_addr) == 1;
}

/* A probability as a JSON number: the flags hold it in [0, 1], so it is always finite; 17 digits
 * give back the very double (as jansson writes reals). */
static void write_probability(jsonw *w, double p)
{
    char text[32];
    snprintf(text, sizeof text, "%.17g", p);
    jw_raw(w, text, "0");
}

static void log_listening(const sim_options *o)
{
    jsonw w;
    log_begin(&w, "info", "processor-sim listening");
    jw_key(&w, "listen");
    jw_string(&w, o->listen);
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
    struct sockaddr_in addr;
    if (!parse_listen(o.listen, &addr)) {
        fprintf(stderr, "payd processor-sim: --listen must be IPv4-HOST:PORT, got '%s'\n",
                o.listen);
        return 2;
    }
    /* a private SQLite file: the simulator opens many connections, which :memory: cannot share */
    if (strstr(o.db, ":memory:")) {
        fprintf(stderr, "payd processor-sim: --db must be a file, not :memory:\n");
        return 2;
    }

    sigset_t stop_signals;
    stop_signals_block(&stop_signals);

    static sim_server srv; /* outlives every connection thread */
    srv.faults = o.faults;
    srv.lose_by = o.lose_by;
    srv.dice = o.faults.seed ? o.faults.seed ^ 0x9e3779b9u : (unsigned)time(NULL);
    pthread_mutex_init(&srv.dice_lock, NULL);
    char err[512];
    store_options opt = {.url = o.db, .max_batch = 256, .writer_conns = 1};
    srv.store = store_open(&opt, err, sizeof err);
    if (!srv.store) {
        fprintf(stderr, "payd processor-sim: %s\n", err);
        return 1;
    }

    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL, NULL, on_access,
        &srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, &srv, MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_LISTEN_BACKLOG_SIZE,
        1024u, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "payd processor-sim: cannot listen on %s\n", o.listen);
        store_close(srv.store);
        return 1;
    }
    log_listening(&o);

    int sig = stop_signals_wait(&stop_signals);
    jsonw line;
    log_begin(&line, "info", "processor-sim stopping");
    jw_key(&line, "signal");
    jw_int(&line, sig);
    log_end(&line);
    MHD_stop_daemon(d); /* waits for every connection thread */
    store_close(srv.store);
    pthread_mutex_destroy(&srv.dice_lock);
    return 0;
}

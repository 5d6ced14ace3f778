#include "server/pipeline.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <openssl/rand.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/ids.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "core/timefmt.h"
#include "http/conn_guard.h"
#include "http/route.h"
#include "http/validate.h"
#include "http/workers.h"
#include "idem/idem.h"
#include "server/auth.h"
#include "server/limits.h"
#include "server/metrics.h"

enum request_state { REQ_RECEIVING, REQ_WAITING, REQ_ANSWERED };

/* ---- request ids and the access log ---- */

static bool valid_request_id(const char *s)
{
    size_t n = 0;
    for (; s[n]; n++)
        if (s[n] < 0x21 || s[n] > 0x7e || n >= 128)
            return false;
    return n >= 1;
}

static void set_request_id(request *req)
{
    const char *given = request_header(req, "X-Request-Id");
    if (given && valid_request_id(given)) {
        snprintf(req->request_id, sizeof req->request_id, "%s", given);
        return;
    }
    uint8_t r[12];
    RAND_bytes(r, sizeof r);
    static const char hex[] = "0123456789abcdef";
    memcpy(req->request_id, "req_", 4);
    for (int i = 0; i < 12; i++) {
        req->request_id[4 + 2 * i] = hex[r[i] >> 4];
        req->request_id[5 + 2 * i] = hex[r[i] & 15];
    }
    req->request_id[28] = '\0';
}

/* One line per request, through the one log writer: every value escaped, never cut. */
static void access_log(request *req, double duration_ms)
{
    jsonw w;
    log_begin(&w, req->status >= 500 ? "error" : "info", "request");
    jw_key(&w, "request_id");
    jw_string(&w, req->request_id);
    jw_key(&w, "method");
    jw_string(&w, req->method);
    jw_key(&w, "route");
    jw_string(&w, req->route ? req->route->name : "unmatched");
    jw_key(&w, "status");
    if (req->status)
        jw_int(&w, req->status);
    else
        jw_null(&w); /* the client left before any answer was sent */
    jw_key(&w, "duration_ms");
    char ms[32];
    snprintf(ms, sizeof ms, "%.3f", duration_ms);
    jw_raw(&w, ms, "0");
    jw_key(&w, "user_id");
    if (req->authenticated) {
        char user[ID_STR_MAX];
        id_format(req->user.id, "usr", user);
        jw_string(&w, user);
    } else {
        jw_null(&w);
    }
    if (req->resp_header_count && response_header(req, "Idempotent-Replayed")) {
        jw_key(&w, "replayed");
        jw_bool(&w, true);
    }
    log_end(&w);
}

/* ---- the pipeline ---- */

/* 413, 415 and invalid_json, in that order; on success req->json holds the object. */
static bool parse_body_or_reply(request *req)
{
    edge_verdict v;
    char detail[256];
    if (edge_parse_body(request_header(req, "Content-Type"), req->body, req->body_len,
                        req->body_too_large, &req->json, &v, detail, sizeof detail))
        return true;
    reply_error(req, v.err, detail);
    return false;
}

static bool authenticate(request *req)
{
    const char *h = request_header(req, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
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
    step(req);
    database_failure_reply(req);
    if (req->idem)
        idem_finish(req);
    if (req->status >= 500)
        log_failed_request(req);
    log_set_request_id(NULL);
}

/* On a worker thread: claim the key if needed, run the handler, wake the connection. */
static void run_waiting_request(void *item)
{
    request *req = item;
    db_thread_failure_reset();
    if (!req->idem || idem_claim_or_reply(req))
        run_step(req, req->route->handler);
    else
        database_failure_reply(req);
    store_thread_done(req->app->store);
    req->state = REQ_ANSWERED;
    atomic_fetch_sub(&req->app->in_flight, 1);
    MHD_resume_connection(req->conn);
}

/* ---- the edge: checks every request passes before any handler, claim or rate limit ---- */

#define MAX_FIELDS     256
#define MAX_QUERY_ARGS 128 /* far above what any route takes; see on_request_line */

typedef struct field_list {
    http_field items[MAX_FIELDS];
    size_t n;
    bool overflow;
} field_list;

/* Collects headers or query arguments with their lengths, so a NUL inside a value stays seen. */
static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                     size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    field_list *l = cls;
    if (l->n == MAX_FIELDS) {
        l->overflow = true;
        return MHD_NO;
    }
    l->items[l->n++] = (http_field){key, key_size, value, value_size, false};
    return MHD_YES;
}

/* libmicrohttpd 0.9.75 hands header values over as C strings cut at the first NUL, and its
 * value length is that of the cut string, so `k\0a` would read as `k`. The raw line is still
 * in its read buffer, in place: after an honest value come the line's end bytes, which the
 * library has overwritten with NULs, and then the next header's name. Any other byte after the
 * NUL is the rest of a value the client sent with a NUL inside. The check reads only bytes of
 * the line the library already found complete, and errs on the side of letting a value pass. */
static void mark_values_cut_at_nul(field_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        http_field *f = &l->items[i];
        if (!f->value)
            continue;
        const char *after = f->value + f->value_len;
        const char *next_name = i + 1 < l->n ? l->items[i + 1].name : NULL;
        if (after[0] == '\0' && after[1] != '\0' && after[1] != '\r' && after[1] != '\n' &&
            after + 1 != next_name)
            f->cut_at_nul = true;
    }
}

static void reply_verdict(request *req, const edge_verdict *v)
{
    reply_error_extra(req, v->err, v->detail, json_pack("{s:s}", "param", v->param));
}

/* Header and query checks of §1. False when it has answered. */
static bool edge_checks_or_reply(request *req)
{
    app *a = req->app;
    field_list fields = {.n = 0}, *l = &fields;
    MHD_get_connection_values_n(req->conn, MHD_HEADER_KIND, collect_field, l);
    mark_values_cut_at_nul(l);
    if (l->overflow || l->n > (size_t)a->cfg.max_headers) {
        reply_error(req, ERR_HEADERS_TOO_LARGE, "too many request headers");
        return false;
    }
    edge_verdict v;
    if (!edge_check_headers(l->items, l->n, &v)) {
        reply_verdict(req, &v);
        return false;
    }
    l->n = 0;
    MHD_get_connection_values_n(req->conn, MHD_GET_ARGUMENT_KIND, collect_field, l);
    if (l->overflow) {
        reply_error(req, ERR_URI_TOO_LONG, "too many query parameters");
        return false;
    }
    if (!edge_check_query(l->items, l->n, req->route->query, &v)) {
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
    route_match_result m = route_match(req->method, req->path, &req->arena, &req->route,
                                       req->params, allow, sizeof allow);
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
    }
}

/* Everything after the body is in. Leaves req->state REQ_WAITING when the request went to a
 * worker. */
static void dispatch(request *req)
{
    app *a = req->app;
    if (!req->admitted)
        admit(req);
    if (req->status)
        return;
    unsigned flags = req->route->flags;
    if ((flags & ROUTE_JSON_BODY) && !parse_body_or_reply(req))
        return;
    if ((flags & ROUTE_BLOCKING) && !app_ids_ready(a)) {
        /* started while the database was away: no node id yet, so nothing can be written */
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_DATABASE_UNAVAILABLE, "the database cannot be reached right now");
        return;
    }
    if ((flags & ROUTE_BLOCKING) && store_queue_depth(a->store) > a->cfg.max_queue) {
        reply_header(req, "Retry-After", "1");
        reply_error(req, ERR_OVERLOADED, "too many requests are waiting for the database");
        return;
    }
    if ((flags & (ROUTE_IDEM_REQUIRED | ROUTE_IDEM_OPTIONAL)) &&
        idem_precheck(req) == IDEM_ANSWERED)
        return;
    if ((flags & ROUTE_BLOCKING) || req->idem) {
        req->state = REQ_WAITING;
        atomic_fetch_add(&a->in_flight, 1);
        MHD_suspend_connection(req->conn);
        worker_pool_submit(a->workers, req);
        return;
    }
    run_step(req, req->route->handler);
}

static enum MHD_Result queue_response(request *req)
{
    if (!req->status)
        reply_error(req, ERR_INTERNAL, "the handler gave no answer");
    struct MHD_Response *resp = MHD_create_response_from_buffer(
        req->resp_len, req->resp_body ? req->resp_body : (char *)"", MHD_RESPMEM_MUST_FREE);
    if (!req->resp_body)
        resp = MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
    req->resp_body = NULL; /* owned by the response now */
    if ((req->resp_len || req->status >= 400) && !response_header(req, "Content-Type"))
        MHD_add_response_header(resp, "Content-Type",
                                req->status >= 400 ? "application/problem+json"
                                                   : "application/json; charset=utf-8");
    MHD_add_response_header(resp, "X-Request-Id", req->request_id);
    for (int i = 0; i < req->resp_header_count; i++)
        MHD_add_response_header(resp, req->resp_headers[i].name, req->resp_headers[i].value);
    enum MHD_Result rc = MHD_queue_response(req->conn, (unsigned)req->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static struct guarded_conn *guard_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

static request *request_new(app *a, struct MHD_Connection *conn)
{
    request *req = calloc(1, sizeof *req);
    arena_init(&req->arena);
    req->app = a;
    req->conn = conn;
    req->start_ns = monotonic_ns();
    return req;
}

/* Called by libmicrohttpd as soon as a request line is read, before it parses the headers: the
 * request exists from here on, so one that the library itself refuses later (a framing error,
 * headers too large) still gets its access-log line with the status the library sent. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    request *req = request_new(cls, conn);
    req->uri_len = strlen(uri);
    char *query = strchr(uri, '?');
    size_t args = query ? 1 : 0;
    for (const char *p = query; p && *p; p++)
        args += *p == '&';
    if (args > MAX_QUERY_ARGS) {
        /* libmicrohttpd 0.9.75 parses the arguments right after this callback, one entry of
         * its connection pool each; when the pool runs out it stalls without answering. The
         * target is still the library's own buffer here: ending it at '?' leaves it nothing to
         * parse, and the request is refused with 414 once its headers are in. */
        req->too_many_args = true;
        query[1] = '\0';
    }
    return req;
}

/* The limits of --max-header-bytes, answered as problem+json. libmicrohttpd's pool is twice
 * that size, so only a request that does not fit the pool gets the library's own HTML 414/431. */
static bool size_limits_or_reply(request *req)
{
    int64_t max = req->app->cfg.max_header_bytes;
    if (req->too_many_args) {
        reply_error(req, ERR_URI_TOO_LONG, "too many query parameters");
        return false;
    }
    if ((int64_t)req->uri_len > max) {
        reply_error(req, ERR_URI_TOO_LONG, "the request target exceeds --max-header-bytes");
        return false;
    }
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (info && (int64_t)info->header_size > max) {
        reply_error(req, ERR_HEADERS_TOO_LARGE, "the request headers exceed --max-header-bytes");
        return false;
    }
    return true;
}

/* Answers at once and closes: for requests whose body must not be read (or trusted). */
static enum MHD_Result answer_and_close(request *req)
{
    conn_guard_body_done(guard_of(req->conn));
    reply_header(req, "Connection", "close");
    return queue_response(req);
}

static bool expects_continue(request *req)
{
    const char *e = request_header(req, "Expect");
    return e && !strcasecmp(e, "100-continue");
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    (void)version;
    request *req = *con_cls;
    if (!req)
        req = *con_cls = request_new(cls, conn);
    if (!req->headers_seen) {
        /* First call: headers only. Answering now would make libmicrohttpd close the
         * connection, so a normal answer always waits for a later call. */
        req->headers_seen = true;
        req->method = method;
        req->path = url;
        set_request_id(req);
        struct guarded_conn *guard = guard_of(conn);
        conn_guard_headers_done(req->app->guard, guard, req->request_id);
        if (conn_guard_over_limit(guard)) {
            reply_header(req, "Retry-After", "1");
            reply_error(req, ERR_OVERLOADED, "too many open connections");
            return answer_and_close(req);
        }
        if (!size_limits_or_reply(req))
            return answer_and_close(req);
        field_list headers = {.n = 0};
        MHD_get_connection_values_n(conn, MHD_HEADER_KIND, collect_field, &headers);
        if (edge_framing_conflict(headers.items, headers.n)) {
            /* RFC 9112 §6.1: the bytes after the headers could be read two ways; read neither */
            reply_error(req, ERR_BAD_FRAMING,
                        "Transfer-Encoding and Content-Length together are refused");
            return answer_and_close(req);
        }
        if (expects_continue(req)) {
            db_thread_failure_reset();
            admit(req);
            store_thread_done(req->app->store); /* the auth lookup's reader goes back */
            if (req->status)
                return answer_and_close(req);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (req->body_too_large || conn_guard_timed_out(guard_of(conn)))
            return MHD_YES;
        if (req->body_len + n > MAX_REQUEST_BODY) {
            req->body_too_large = true;
            free(req->body);
            req->body = NULL;
            req->body_len = 0;
            return MHD_YES;
        }
        if (req->body_len + n + 1 > req->body_cap) {
            req->body_cap = (req->body_len + n + 1) * 2;
            req->body = realloc(req->body, req->body_cap);
        }
        memcpy(req->body + req->body_len, upload_data, n);
        req->body_len += n;
        req->body[req->body_len] = '\0';
        return MHD_YES;
    }
    if (req->state == REQ_RECEIVING) {
        if (!conn_guard_body_done(guard_of(conn))) {
            req->status = 408; /* the watchdog answered; the access log says so */
            return MHD_NO;
        }
        db_thread_failure_reset();
        dispatch(req);
        /* a reader taken on this thread goes back to the pool: the budget is per request */
        store_thread_done(req->app->store);
        if (req->state == REQ_WAITING)
            return MHD_YES;
    }
    return queue_response(req);
}

void request_free(request *req)
{
    free(req->body);
    free(req->resp_body);
    json_decref(req->json);
    if (req->idem)
        free(req->idem->canonical_body);
    arena_free(&req->arena);
    free(req);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    app *a = cls;
    request *req = *con_cls;
    if (!req)
        return;
    struct guarded_conn *guard = guard_of(conn);
    if (conn_guard_timed_out(guard)) {
        req->status = 408;
    } else if (!req->status) {
        /* libmicrohttpd answered this one itself (a framing error, headers too large) */
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS);
        req->status = info ? (int)info->http_status : 0;
    }
    conn_guard_rearm(a->guard, guard); /* the next request has its own header deadline */
    if (!req->request_id[0])
        set_request_id(req);
    double ms = (double)(monotonic_ns() - req->start_ns) / 1e6;
    if (req->status) /* 0: the client left before any answer; nothing was served */
        metrics_observe_request(a->metrics, req->route ? req->route->name : "unmatched",
                                req->method, req->status, ms);
    if (a->cfg.access_log)
        access_log(req, ms);
    request_free(req);
    *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    app *a = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = info ? conn_guard_open(a->guard, info->connect_fd) : NULL;
    } else {
        conn_guard_close(a->guard, *socket_context);
        *socket_context = NULL;
    }
}

/* Splits HOST:PORT, [IPV6]:PORT or :PORT. */
static int split_listen(const char *listen_on, char *host, size_t host_len, char *port,
                        size_t port_len)
{
    const char *colon;
    if (listen_on[0] == '[') {
        const char *close = strchr(listen_on, ']');
        if (!close || close[1] != ':')
            return -1;
        snprintf(host, host_len, "%.*s", (int)(close - listen_on - 1), listen_on + 1);
        colon = close + 1;
    } else {
        colon = strrchr(listen_on, ':');
        if (!colon || memchr(listen_on, ':', (size_t)(colon - listen_on)))
            return -1; /* an IPv6 address must be bracketed */
        snprintf(host, host_len, "%.*s", (int)(colon - listen_on), listen_on);
    }
    snprintf(port, port_len, "%s", colon + 1);
    char *end;
    long p = strtol(port, &end, 10);
    return (!port[0] || *end || p < 0 || p > 65535) ? -1 : 0;
}

/* The listening socket, made here rather than by libmicrohttpd so that it is exclusive (no
 * SO_REUSEPORT: a second payd on the same port is an error, never a silent share), takes host
 * names and IPv6, and reports why it failed. Writes the address it got (port 0 picks one) back
 * into listen_on. */
static int open_listener(char *listen_on, size_t listen_cap, char *err, size_t errlen)
{
    char host[128], port[16];
    if (split_listen(listen_on, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, errlen, "--listen must be HOST:PORT or [IPV6]:PORT, got '%s'", listen_on);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV},
                    *found;
    int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &found);
    if (rc != 0) {
        snprintf(err, errlen, "--listen: cannot resolve '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = found; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int on = 1; /* rebinding over TIME_WAIT only; Linux never lets two listeners share */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(found);
    if (fd < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", listen_on, strerror(saved));
        return -1;
    }
    struct sockaddr_storage got;
    socklen_t got_len = sizeof got;
    char numeric[INET6_ADDRSTRLEN] = "?";
    int real_port = 0;
    if (getsockname(fd, (struct sockaddr *)&got, &got_len) == 0) {
        if (got.ss_family == AF_INET6) {
            struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&got;
            inet_ntop(AF_INET6, &a6->sin6_addr, numeric, sizeof numeric);
            real_port = ntohs(a6->sin6_port);
        } else {
            struct sockaddr_in *a4 = (struct sockaddr_in *)&got;
            inet_ntop(AF_INET, &a4->sin_addr, numeric, sizeof numeric);
            real_port = ntohs(a4->sin_port);
        }
    }
    snprintf(listen_on, listen_cap, got.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", numeric,
             real_port);
    return fd;
}

/* libmicrohttpd's own messages, as log lines. Its refusals (505, a malformed request line, 414,
 * 431, 413 and framing errors) are answered with its fixed HTML bodies, and some come before the
 * request line is read, so no request object and no access line exist for them: this line, with
 * the status it sent, is their record. */
static void on_library_message(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char text[512];
    vsnprintf(text, sizeof text, fmt, ap);
    text[strcspn(text, "\r\n")] = '\0';
    char *html = strstr(text, " ('<html>");
    if (html) /* the body it sent adds nothing to the status */
        *html = '\0';
    char *code = strstr(text, "HTTP response code is ");
    int status = code ? atoi(code + strlen("HTTP response code is ")) : 0;
    char *paren = strstr(text, " (HTTP response code");
    if (paren)
        *paren = '\0';
    jsonw w;
    log_begin(&w, "warn", status ? "refused by the HTTP library" : "HTTP library");
    if (status) {
        jw_key(&w, "status");
        jw_int(&w, status);
    }
    jw_key(&w, "detail");
    jw_string(&w, text);
    log_end(&w);
}

int http_server_start(app *a, char *err, size_t errlen)
{
    int listener = open_listener(a->cfg.listen, sizeof a->cfg.listen, err, errlen);
    if (listener < 0)
        return -1;
    int threads = a->cfg.threads > 0 ? (int)a->cfg.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    conn_guard_limits limits = {.header_timeout_ms = a->cfg.header_timeout_ms,
                                .body_timeout_ms = a->cfg.body_timeout_ms,
                                .request_timeout_ms = a->cfg.request_timeout_ms,
                                .max_connections = a->cfg.max_connections};
    a->guard = conn_guard_start(&limits);
    a->workers = worker_pool_start((int)a->cfg.workers, run_waiting_request);
    /* libmicrohttpd stops accepting at its own limit, which leaves clients in the kernel queue;
     * its limit sits above ours so the connections past ours are accepted and answered 503. */
    unsigned library_limit = (unsigned)(a->cfg.max_connections + 64 + a->cfg.max_connections / 4);
    /* The per-connection pool holds the read buffer, the headers and the query arguments. Its
     * size is paid on every request (the library clears it between requests on a connection:
     * a pool 16 times larger cut keep-alive throughput to a quarter), so it stays small and
     * payd enforces its own limits (size_limits_or_reply, MAX_QUERY_ARGS). */
    size_t pool = (size_t)a->cfg.max_header_bytes * 2;
    a->daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO |
            MHD_USE_ERROR_LOG,
        0, NULL, NULL, on_access, a, MHD_OPTION_EXTERNAL_LOGGER, on_library_message, NULL,
        MHD_OPTION_LISTEN_SOCKET, listener, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, a, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        a, MHD_OPTION_URI_LOG_CALLBACK, on_request_line, a, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)((a->cfg.idle_timeout_ms + 999) / 1000), MHD_OPTION_CONNECTION_LIMIT,
        library_limit, MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool, MHD_OPTION_END);
    if (!a->daemon) {
        snprintf(err, errlen, "cannot start the HTTP server on %s", a->cfg.listen);
        close(listener);
        worker_pool_stop(a->workers);
        a->workers = NULL;
        conn_guard_stop(a->guard);
        a->guard = NULL;
        return -1;
    }
    return 0;
}

void http_server_stop(app *a)
{
    if (!a->daemon)
        return;
    atomic_store(&a->shutting_down, true);
    MHD_socket listener = MHD_quiesce_daemon(a->daemon);
    if (listener != MHD_INVALID_SOCKET)
        close(listener);
    int64_t deadline = monotonic_ns() + a->cfg.shutdown_timeout_ms * 1000000;
    while (atomic_load(&a->in_flight) > 0 && monotonic_ns() < deadline) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* resumed connections get a moment to send their answers */
    struct timespec ts = {0, 100 * 1000 * 1000};
    worker_pool_stop(a->workers); /* runs anything still queued, so nothing is left half-done */
    a->workers = NULL;
    nanosleep(&ts, NULL);
    MHD_stop_daemon(a->daemon);
    a->daemon = NULL;
    conn_guard_stop(a->guard);
    a->guard = NULL;
}

#include "http/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/ids.h"
#include "core/timefmt.h"
#include "http/conn_guard.h"
#include "http/route.h"
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

static void access_log(request *req, double duration_ms)
{
    char when[32], user[ID_STR_MAX] = "", line[1024];
    format_rfc3339_ms(now_us(), when);
    if (req->authenticated)
        id_format(req->user.id, "usr", user);
    json_t *rid = json_string(req->request_id);
    char *rid_json = json_dumps(rid, JSON_ENCODE_ANY);
    int n = snprintf(line, sizeof line,
                     "{\"time\":\"%s\",\"request_id\":%s,\"method\":\"%s\",\"route\":\"%s\","
                     "\"status\":%d,\"duration_ms\":%.3f,\"user_id\":%s%s%s%s}\n",
                     when, rid_json ? rid_json : "null", req->method,
                     req->route ? req->route->name : "unmatched", req->status, duration_ms,
                     user[0] ? "\"" : "", user[0] ? user : "null", user[0] ? "\"" : "",
                     req->resp_header_count && response_header(req, "Idempotent-Replayed")
                         ? ",\"replayed\":true"
                         : "");
    free(rid_json);
    json_decref(rid);
    if (n > 0)
        fwrite(line, 1, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1, stderr);
}

/* ---- the pipeline ---- */

static bool json_content_type(const char *ct)
{
    if (!ct)
        return false;
    while (*ct == ' ')
        ct++;
    size_t n = strlen("application/json");
    return !strncasecmp(ct, "application/json", n) &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* 413, 415 and invalid_json, in that order; on success req->json holds the object. */
static bool parse_body_or_reply(request *req)
{
    if (req->body_too_large) {
        reply_error(req, ERR_PAYLOAD_TOO_LARGE, "the request body exceeds 64 KiB");
        return false;
    }
    const char *ct = request_header(req, "Content-Type");
    if (req->body_len == 0 && !ct) {
        req->json = json_object(); /* no body at all: an empty object, as for optional fields */
        return true;
    }
    if (!json_content_type(ct)) {
        reply_error(req, ERR_UNSUPPORTED_MEDIA_TYPE,
                    "send the body as Content-Type: application/json");
        return false;
    }
    json_error_t jerr;
    req->json =
        json_loadb(req->body ? req->body : "", req->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (!req->json) {
        char detail[256];
        snprintf(detail, sizeof detail, "malformed JSON at line %d column %d: %s", jerr.line,
                 jerr.column, jerr.text);
        reply_error(req, ERR_INVALID_JSON, detail);
        return false;
    }
    if (!json_is_object(req->json)) {
        reply_error(req, ERR_INVALID_JSON, "the body must be a JSON object");
        return false;
    }
    return true;
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

void run_handler(request *req)
{
    req->route->handler(req);
    database_failure_reply(req);
    if (req->idem)
        idem_finish(req);
}

/* On a worker thread: claim the key if needed, run the handler, wake the connection. */
static void run_waiting_request(void *item)
{
    request *req = item;
    db_thread_failure_reset();
    if (!req->idem || idem_claim_or_reply(req))
        run_handler(req);
    else
        database_failure_reply(req);
    store_thread_done(req->app->store);
    req->state = REQ_ANSWERED;
    atomic_fetch_sub(&req->app->in_flight, 1);
    MHD_resume_connection(req->conn);
}

/* Everything that can be decided on the HTTP thread. Leaves req->state REQ_WAITING when the
 * request went to a worker. */
static void dispatch(request *req)
{
    app *a = req->app;
    char allow[64];
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
    if (MHD_get_connection_values(req->conn, MHD_HEADER_KIND, NULL, NULL) > a->cfg.max_headers) {
        reply_error(req, ERR_HEADERS_TOO_LARGE, "too many request headers");
        return;
    }
    unsigned flags = req->route->flags;
    if (flags & ROUTE_AUTH) {
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
    if ((flags & ROUTE_JSON_BODY) && !parse_body_or_reply(req))
        return;
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
    run_handler(req);
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

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    request *req = *con_cls;
    if (!req) {
        /* First call: headers only. Answering now would make libmicrohttpd close the
         * connection, so the answer always waits for a later call. */
        req = calloc(1, sizeof *req);
        arena_init(&req->arena);
        req->app = cls;
        req->conn = conn;
        req->method = method;
        req->path = url;
        req->start_ns = monotonic_ns();
        set_request_id(req);
        *con_cls = req;
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        if (info)
            conn_guard_headers_done(info->socket_context);
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (req->body_too_large)
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
    app *a = cls;
    request *req = *con_cls;
    if (!req)
        return;
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (info) /* the next request on this connection has its own header deadline */
        conn_guard_rearm(a->guard, info->socket_context);
    double ms = (double)(monotonic_ns() - req->start_ns) / 1e6;
    metrics_observe_request(a->metrics, req->route ? req->route->name : "unmatched", req->method,
                            req->status, ms);
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

int http_server_start(app *a, char *err, size_t errlen)
{
    char host[128];
    snprintf(host, sizeof host, "%s", a->cfg.listen);
    char *colon = strrchr(host, ':');
    if (!colon) {
        snprintf(err, errlen, "--listen must be HOST:PORT, got '%s'", a->cfg.listen);
        return -1;
    }
    *colon = '\0';
    int port = atoi(colon + 1);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host[0] ? host : "0.0.0.0", &addr.sin_addr) != 1) {
        snprintf(err, errlen, "--listen: '%s' is not an IPv4 address", host);
        return -1;
    }
    int threads = a->cfg.threads > 0 ? (int)a->cfg.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    a->guard = conn_guard_start(a->cfg.header_timeout_ms);
    a->workers = worker_pool_start((int)a->cfg.workers, run_waiting_request);
    a->daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO, 0, NULL, NULL,
        on_access, a, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_THREAD_POOL_SIZE,
        (unsigned)threads, MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, a, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)((a->cfg.idle_timeout_ms + 999) / 1000), MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)a->cfg.max_connections, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)a->cfg.max_header_bytes * 2, MHD_OPTION_LISTENING_ADDRESS_REUSE, 1,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, MHD_OPTION_END);
    if (!a->daemon) {
        snprintf(err, errlen, "cannot listen on %s", a->cfg.listen);
        worker_pool_stop(a->workers);
        a->workers = NULL;
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

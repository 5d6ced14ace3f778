#include "http/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cpus.h"
#include "core/log.h"
#include "http/address.h"
#include "http/tls.h"

struct http_server {
    struct MHD_Daemon *daemon;
    int listener; /* our listening socket, which the library polls */
    conn_guard *guard;
    http_handlers h;
    size_t max_body;
    unsigned max_query_args;
    /* --trust-proxy: the addresses (or CIDR ranges) whose X-Forwarded-For names the client */
    trusted_range trusted_proxies[HTTP_MAX_TRUSTED_PROXIES];
    size_t trusted_proxy_count;
};

struct http_exchange {
    http_server *server;
    struct MHD_Connection *conn;
    guarded_conn *guard; /* the connection's deadlines */
    void *req;           /* the handlers' object */
    size_t target_len;
    char client[INET6_ADDRSTRLEN]; /* the client's address, once the headers are in */
    char peer[INET6_ADDRSTRLEN];   /* the peer's address, read once (exchange_peer); "": unknown */
    bool peer_read;
    bool query_dropped;
    bool headers_seen; /* the access handler has been called for this request */
    bool body_seen;    /* the body callback has run: what is left is to send the answer */
    char *body;
    size_t body_len, body_cap;
    bool body_too_large;
    /* the answer given (http_exchange_respond), not yet sent */
    bool answered;
    bool close_after; /* answered before the body: the connection closes after it */
    bool drop;        /* http_exchange_drop: closed with no answer */
    http_response answer;
    http_header answer_headers[HTTP_MAX_ANSWER_HEADERS];
};

static guarded_conn *guard_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

static http_exchange *exchange_new(http_server *s, struct MHD_Connection *conn)
{
    http_exchange *ex = calloc(1, sizeof *ex);
    ex->server = s;
    ex->conn = conn;
    ex->guard = guard_of(conn);
    ex->req = s->h.request_line(s->h.ctx, ex);
    return ex;
}

static void exchange_free(http_exchange *ex)
{
    if (ex->answered)
        free(ex->answer.body);
    free(ex->body);
    free(ex);
}

/* ---- reading the request ---- */

const char *http_exchange_header(http_exchange *ex, const char *name)
{
    return MHD_lookup_connection_value(ex->conn, MHD_HEADER_KIND, name);
}

const char *http_exchange_query(http_exchange *ex, const char *name)
{
    return MHD_lookup_connection_value(ex->conn, MHD_GET_ARGUMENT_KIND, name);
}

typedef struct field_list {
    http_field *items;
    size_t n, cap;
    bool overflow;
} field_list;

/* Collects headers or query arguments with their lengths, so a NUL inside a value stays seen. */
static enum MHD_Result collect_field(void *cls, enum MHD_ValueKind kind, const char *key,
                                     size_t key_size, const char *value, size_t value_size)
{
    (void)kind;
    field_list *l = cls;
    if (l->n == l->cap) {
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

bool http_exchange_headers(http_exchange *ex, http_field *out, size_t cap, size_t *n)
{
    field_list l = {out, 0, cap, false};
    MHD_get_connection_values_n(ex->conn, MHD_HEADER_KIND, collect_field, &l);
    mark_values_cut_at_nul(&l);
    *n = l.n;
    return !l.overflow;
}

bool http_exchange_query_args(http_exchange *ex, http_field *out, size_t cap, size_t *n)
{
    field_list l = {out, 0, cap, false};
    MHD_get_connection_values_n(ex->conn, MHD_GET_ARGUMENT_KIND, collect_field, &l);
    *n = l.n;
    return !l.overflow;
}

static bool peer_address(struct MHD_Connection *conn, char *out, size_t cap)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info && info->client_addr && address_text(info->client_addr, out, cap);
}

/* The peer's numeric address, read from the library once per request (the access log, the
 * client's address and the plain-HTTP check all ask); NULL when unknown. */
static const char *exchange_peer(http_exchange *ex)
{
    if (!ex->peer_read) {
        ex->peer_read = true;
        if (!peer_address(ex->conn, ex->peer, sizeof ex->peer))
            ex->peer[0] = '\0';
    }
    return ex->peer[0] ? ex->peer : NULL;
}

static bool is_trusted_proxy(const http_server *s, const char *peer)
{
    int family;
    uint8_t bits[16];
    if (!s->trusted_proxy_count || !address_parse_binary(peer, &family, bits))
        return false;
    for (size_t i = 0; i < s->trusted_proxy_count; i++)
        if (trusted_range_contains(&s->trusted_proxies[i], family, bits))
            return true;
    return false;
}

/* The client a request comes from: the peer, or for a peer that is a trusted proxy, the last
 * address of X-Forwarded-For (the one that proxy appended; those before it are the client's
 * own word). A proxy's request without a usable one is its own. */
static void find_client(http_exchange *ex)
{
    const char *peer = exchange_peer(ex);
    if (!peer) {
        snprintf(ex->client, sizeof ex->client, "unknown");
        return;
    }
    memcpy(ex->client, peer, sizeof ex->client);
    if (!is_trusted_proxy(ex->server, ex->client))
        return;
    const char *xff = http_exchange_header(ex, "X-Forwarded-For");
    if (!xff)
        return;
    const char *last = strrchr(xff, ',');
    last = last ? last + 1 : xff;
    last += strspn(last, " \t");
    size_t len = strcspn(last, " \t");
    char client[INET6_ADDRSTRLEN];
    if (address_normalise(last, len, client, sizeof client))
        memcpy(ex->client, client, sizeof client);
}

bool http_exchange_client_address(http_exchange *ex, char *out, size_t cap)
{
    if (!ex->client[0])
        find_client(ex);
    snprintf(out, cap, "%s", ex->client);
    return strcmp(ex->client, "unknown") != 0;
}

bool http_exchange_peer_address(http_exchange *ex, char *out, size_t cap)
{
    const char *peer = exchange_peer(ex);
    if (!peer || strlen(peer) >= cap)
        return false;
    memcpy(out, peer, strlen(peer) + 1);
    return true;
}

bool http_exchange_in_clear_from_afar(http_exchange *ex)
{
    const char *peer = exchange_peer(ex);
    if (http_tls_enabled() || !peer)
        return false;
    bool loopback = !strncmp(peer, "127.", 4) || !strcmp(peer, "::1");
    return !loopback && !is_trusted_proxy(ex->server, peer);
}

bool http_trusted_proxies_valid(const char *list, char *err, size_t errlen)
{
    trusted_range scratch[HTTP_MAX_TRUSTED_PROXIES];
    size_t count = 0;
    return trusted_ranges_parse(list, scratch, HTTP_MAX_TRUSTED_PROXIES, &count, err, errlen);
}

/* ---- deadlines ---- */

void http_exchange_body_deadline(http_exchange *ex, const char *request_id)
{
    conn_guard_headers_done(ex->server->guard, ex->guard, request_id);
}

bool http_exchange_timed_out(http_exchange *ex)
{
    return conn_guard_timed_out(ex->guard);
}

int http_exchange_library_status(http_exchange *ex)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(ex->conn, MHD_CONNECTION_INFO_HTTP_STATUS);
    return info ? (int)info->http_status : 0;
}

/* ---- answering ---- */

void http_exchange_respond(http_exchange *ex, const http_response *r)
{
    if (ex->answered)
        free(ex->answer.body);
    size_t n =
        r->header_count < HTTP_MAX_ANSWER_HEADERS ? r->header_count : HTTP_MAX_ANSWER_HEADERS;
    memcpy(ex->answer_headers, r->headers, n * sizeof *r->headers);
    ex->answer = *r;
    ex->answer.headers = ex->answer_headers;
    ex->answer.header_count = n;
    ex->answered = true;
}

void http_exchange_drop(http_exchange *ex)
{
    ex->drop = true;
}

void http_exchange_suspend(http_exchange *ex)
{
    MHD_suspend_connection(ex->conn);
}

void http_exchange_resume(http_exchange *ex)
{
    MHD_resume_connection(ex->conn);
}

/* Makes the library's response of the answer given and queues it: the access handler's
 * result. On the connection's thread. */
static enum MHD_Result send_answer(http_exchange *ex)
{
    if (!ex->answered || ex->drop)
        return MHD_NO; /* the library closes the connection */
    const http_response *r = &ex->answer;
    struct MHD_Response *resp =
        r->body ? MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE)
                : MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
    ex->answered = false; /* the body is the library's now */
    for (size_t i = 0; i < r->header_count; i++)
        MHD_add_response_header(resp, r->headers[i].name, r->headers[i].value);
    if (ex->close_after)
        MHD_add_response_header(resp, "Connection", "close");
    enum MHD_Result rc = MHD_queue_response(ex->conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* ---- the library's callbacks ---- */

/* Called by libmicrohttpd as soon as a request line is read, before it parses the headers: the
 * request exists from here on, so one that the library itself refuses later (a framing error,
 * headers too large) still reaches the completed callback with the status the library sent. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *conn)
{
    http_server *s = cls;
    http_exchange *ex = exchange_new(s, conn);
    ex->target_len = strlen(uri);
    char *query = strchr(uri, '?');
    size_t args = query ? 1 : 0;
    for (const char *p = query; p && *p; p++)
        args += *p == '&';
    if (args > s->max_query_args) {
        /* libmicrohttpd 0.9.75 parses the arguments right after this callback, one entry of
         * its connection pool each; when the pool runs out it stalls without answering. The
         * target is still the library's own buffer here: ending it at '?' leaves it nothing to
         * parse, and the handlers refuse the request once its headers are in. */
        ex->query_dropped = true;
        query[1] = '\0';
    }
    return ex;
}

static enum MHD_Result on_headers(http_exchange *ex, const char *url, const char *method)
{
    http_server *s = ex->server;
    find_client(ex);
    if (s->trusted_proxy_count) /* through a proxy, the connection is its request's client's */
        conn_guard_attribute(s->guard, ex->guard, ex->client);
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(ex->conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    http_head head = {.method = method,
                      .path = url,
                      .target_len = ex->target_len,
                      .header_bytes = info ? info->header_size : 0,
                      .query_dropped = ex->query_dropped,
                      .over_limit = conn_guard_over_limit(ex->guard),
                      .over_client_limit = conn_guard_over_client_limit(ex->guard)};
    s->h.headers(ex->req, ex, &head);
    if (!ex->answered)
        return MHD_YES;
    /* an answer before the body: the bytes after the headers are never read */
    conn_guard_body_done(ex->guard);
    ex->close_after = true;
    return send_answer(ex);
}

/* Accumulates the body up to max_body; past it the body is dropped and reported too large. */
static void take_upload(http_exchange *ex, const char *data, size_t n)
{
    if (ex->body_too_large || conn_guard_timed_out(ex->guard))
        return;
    if (ex->body_len + n > ex->server->max_body) {
        ex->body_too_large = true;
        free(ex->body);
        ex->body = NULL;
        ex->body_len = 0;
        return;
    }
    if (ex->body_len + n + 1 > ex->body_cap) {
        ex->body_cap = (ex->body_len + n + 1) * 2;
        ex->body = realloc(ex->body, ex->body_cap);
    }
    memcpy(ex->body + ex->body_len, data, n);
    ex->body_len += n;
    ex->body[ex->body_len] = '\0';
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    (void)version;
    http_exchange *ex = *con_cls;
    if (!ex)
        ex = *con_cls = exchange_new(cls, conn);
    if (!ex->headers_seen) {
        /* First call: headers only. Answering now makes libmicrohttpd close the connection, so
         * a normal answer always waits for a later call. */
        ex->headers_seen = true;
        return on_headers(ex, url, method);
    }
    if (*upload_data_size) {
        take_upload(ex, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!ex->body_seen) {
        if (!conn_guard_body_done(ex->guard))
            return MHD_NO; /* the watchdog answered 408 */
        ex->body_seen = true;
        if (ex->server->h.body(ex->req, ex, ex->body, ex->body_len, ex->body_too_large))
            return MHD_YES; /* suspended; resumed once answered */
    }
    return send_answer(ex);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    http_server *s = cls;
    http_exchange *ex = *con_cls;
    if (!ex)
        return;
    s->h.completed(ex->req, ex);
    conn_guard_rearm(s->guard, ex->guard); /* the next request has its own header deadline */
    exchange_free(ex);
    *con_cls = NULL;
}

/* Before a byte is read: a client flooding past its connection cap is closed here. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    http_server *s = cls;
    char peer[INET6_ADDRSTRLEN];
    if (!address_text(addr, peer, sizeof peer) || is_trusted_proxy(s, peer))
        return MHD_YES;
    return conn_guard_admit(s->guard, peer) ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    http_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        char peer[INET6_ADDRSTRLEN];
        bool known = peer_address(conn, peer, sizeof peer);
        /* a trusted proxy's connections are counted for the clients its requests name */
        const char *client = !known ? "unknown" : is_trusted_proxy(s, peer) ? NULL : peer;
        *socket_context = info ? conn_guard_open(s->guard, info->connect_fd, client) : NULL;
    } else {
        conn_guard_close(s->guard, *socket_context);
        *socket_context = NULL;
    }
}

/* libmicrohttpd's messages, without the HTML body of a refusal and with its status apart. Its
 * refusals (505, a malformed request line, 414, 431, 413 and framing errors) are answered with
 * its fixed HTML bodies, and some come before the request line is read, so no exchange exists
 * for them: the message, with the status it sent, is their record. */
static void on_library_message(void *cls, const char *fmt, va_list ap)
{
    http_server *s = cls;
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
    s->h.message(s->h.ctx, status, text);
}

void http_log_library_message(void *ctx, int status, const char *text)
{
    (void)ctx;
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

/* ---- the listener and the daemon ---- */

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

/* Splits listen_on as split_listen does; when it is malformed, err says so. */
static bool split_listen_or_explain(const char *listen_on, char *host, size_t host_len, char *port,
                                    size_t port_len, char *err, size_t errlen)
{
    if (split_listen(listen_on, host, host_len, port, port_len) == 0)
        return true;
    snprintf(err, errlen, "--listen must be HOST:PORT, [IPV6]:PORT or :PORT, got '%s'", listen_on);
    return false;
}

bool http_listen_address_valid(const char *listen_on, char *err, size_t errlen)
{
    char host[128], port[16];
    return split_listen_or_explain(listen_on, host, sizeof host, port, sizeof port, err, errlen);
}

/* The listening socket, made here rather than by libmicrohttpd so that it is exclusive (no
 * SO_REUSEPORT: a second payd on the same port is an error, never a silent share), takes host
 * names and IPv6, and reports why it failed. Writes the address it got (port 0 picks one) back
 * into listen_on. */
static int open_listener(char *listen_on, size_t listen_cap, char *err, size_t errlen)
{
    char host[128], port[16];
    if (!split_listen_or_explain(listen_on, host, sizeof host, port, sizeof port, err, errlen))
        return -1;
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

/* The library's silence timeout, in its whole seconds: --idle-timeout, but at least a second
 * past --body-timeout. The library measures silence from the last byte, so with both at 30 s
 * it closed a stalled body without a word at the very moment the guard was to answer 408; the
 * guard's deadlines (body, request) are the ones that answer, and must always come first. An
 * idle keep-alive connection is cut by the header deadline anyway (--header-timeout). */
static unsigned library_idle_timeout_s(const http_limits *limits)
{
    int64_t ms = limits->idle_timeout_ms;
    if (ms < limits->guard.body_timeout_ms + 1000)
        ms = limits->guard.body_timeout_ms + 1000;
    return (unsigned)((ms + 999) / 1000);
}

http_server *http_server_start(char *listen_on, size_t listen_cap, const http_limits *limits,
                               const http_handlers *handlers, char *err, size_t errlen)
{
    int listener = open_listener(listen_on, listen_cap, err, errlen);
    if (listener < 0)
        return NULL;
    http_server *s = calloc(1, sizeof *s);
    if (!trusted_ranges_parse(limits->trusted_proxies ? limits->trusted_proxies : "",
                              s->trusted_proxies, HTTP_MAX_TRUSTED_PROXIES, &s->trusted_proxy_count,
                              err, errlen)) {
        close(listener);
        free(s);
        return NULL;
    }
    s->listener = listener;
    s->h = *handlers;
    s->max_body = limits->max_body;
    s->max_query_args = limits->max_query_args;
    s->guard = conn_guard_start(&limits->guard);
    int threads = limits->threads > 0 ? limits->threads : cpus_available();
    /* libmicrohttpd stops accepting at its own limit, which leaves clients in the kernel queue;
     * its limit sits above ours so the connections past ours are accepted and answered 503. */
    int64_t max_connections = limits->guard.max_connections;
    unsigned library_limit = (unsigned)(max_connections + 64 + max_connections / 4);
    /* The per-connection pool holds the read buffer, the headers and the query arguments. Its
     * size is paid on every request (the library clears it between requests on a connection:
     * a pool 16 times larger cut keep-alive throughput to a quarter), so it stays small and the
     * handlers enforce their own limits (max_header_bytes, max_query_args). 8 KiB above the
     * header limit leaves room for the request line, the parsed arguments and the answer's
     * headers; a header block past it gets the library's own 431. */
    size_t pool_bytes = (size_t)limits->max_header_bytes + 8192;
    /* one thread is the daemon's own, no pool: the library warns about a pool of one */
    struct MHD_OptionItem pool[] = {
        {threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END, threads, NULL},
        {MHD_OPTION_END, 0, NULL}};
    /* HTTPS when a certificate was loaded: its options come last, so plain HTTP ends the list
     * before them */
    bool tls = http_tls_enabled();
    s->daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO |
            MHD_USE_ERROR_LOG | (tls ? MHD_USE_TLS : 0),
        0, on_accept, s, on_access, s, MHD_OPTION_EXTERNAL_LOGGER, on_library_message, s,
        MHD_OPTION_LISTEN_SOCKET, listener, MHD_OPTION_ARRAY, pool, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_URI_LOG_CALLBACK, on_request_line, s, MHD_OPTION_CONNECTION_TIMEOUT,
        library_idle_timeout_s(limits), MHD_OPTION_CONNECTION_LIMIT, library_limit,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool_bytes,
        tls ? MHD_OPTION_HTTPS_PRIORITIES : MHD_OPTION_END, HTTP_TLS_PRIORITIES,
        MHD_OPTION_HTTPS_CERT_CALLBACK, http_tls_pick_certificate, MHD_OPTION_END);
    if (!s->daemon) {
        snprintf(err, errlen, "cannot start the HTTP server on %s", listen_on);
        close(listener);
        conn_guard_stop(s->guard);
        free(s);
        return NULL;
    }
    return s;
}

/* Stops accepting. Not with MHD_quiesce_daemon: in 0.9.75 it removes the listening socket from
 * each worker's epoll set while the worker, seeing the daemon quiesced, may remove it too, and
 * the loser of that race aborts the process ("Failed to remove listen FD from epoll set"; seen
 * under the sanitizers). Instead the socket is replaced, under the same descriptor, by one that
 * listens to nothing: the kernel closes the listener (new connections are refused) and drops it
 * from every epoll set itself, and the library, which never learns, closes the stand-in when it
 * stops. */
void http_server_quiesce(http_server *s)
{
    int stand_in = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (stand_in < 0 || dup2(stand_in, s->listener) < 0) {
        /* no descriptor to spare: keep accepting; the pipeline answers 503 shutting_down */
        if (stand_in >= 0)
            close(stand_in);
        return;
    }
    close(stand_in);
}

void http_server_stop(http_server *s)
{
    MHD_stop_daemon(s->daemon);
    conn_guard_stop(s->guard);
    free(s);
}

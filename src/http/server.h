#ifndef PAYD_HTTP_SERVER_H
#define PAYD_HTTP_SERVER_H
/* The HTTP server: libmicrohttpd 0.9.75 (an epoll thread pool) behind a few calls and callbacks,
 * so that nothing above this layer names the library. It owns what is HTTP framing: the
 * listening socket, the connection deadlines and cap (conn_guard.h), the body (read up to a
 * limit), suspending and resuming an exchange, and where the library's own buffers must be read
 * to see what it hides. It knows no route, user, key or metric: the handlers decide.
 *
 * One exchange is one request and its answer. Its callbacks run on the thread serving its
 * connection, in order: request_line, headers, body, completed (request_line and completed
 * alone when the library refuses the request itself). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/conn_guard.h"
#include "http/validate.h"

typedef struct http_server http_server;
typedef struct http_exchange http_exchange;

typedef struct http_header {
    const char *name, *value;
} http_header;

/* What is known once the headers are in. */
typedef struct http_head {
    const char *method, *path; /* path: decoded, without the query */
    size_t target_len;         /* the request target as sent, query included */
    size_t header_bytes;       /* the header block as sent */
    bool query_dropped;        /* more than max_query_args arguments: none were parsed */
    bool over_limit;           /* the connection was opened past max_connections */
    bool over_client_limit;    /* its client has more than max_connections_per_client open */
} http_head;

typedef struct http_handlers {
    void *ctx;
    /* A request line was read: returns the handlers' object for this request (the `req` of the
     * calls below). The request exists from here on, even if the library refuses it later. */
    void *(*request_line)(void *ctx, http_exchange *ex);
    /* Headers complete. An answer given here (http_exchange_respond) is sent at once with
     * Connection: close, and the body is never read. */
    void (*headers)(void *req, http_exchange *ex, const http_head *head);
    /* Body complete (too_large: more than max_body was sent, and dropped). Either answers
     * (http_exchange_respond) and returns false, or has suspended the exchange and returns true:
     * whoever finishes the wait answers and resumes it, possibly before this returns. Not called
     * when the body deadline passed (the guard answered 408). */
    bool (*body)(void *req, http_exchange *ex, const char *body, size_t len, bool too_large);
    /* The exchange is over: answered, refused by the library, or left by the client. The
     * exchange can still be read here, and not after. */
    void (*completed)(void *req, http_exchange *ex);
    /* A message of the library; status: the status of a refusal it answered itself, or 0. */
    void (*message)(void *ctx, int status, const char *text);
} http_handlers;

#define HTTP_MAX_TRUSTED_PROXIES 16
typedef struct http_limits {
    int threads;              /* event-loop threads; 0: one per CPU this process may run on */
    int64_t idle_timeout_ms;  /* a connection silent this long is closed (at least a second past
                               * the body deadline, so the 408 always comes first) */
    int64_t max_header_bytes; /* the library's per-connection pool is twice this */
    size_t max_body;          /* a larger body is dropped and reported too_large */
    unsigned max_query_args;  /* more: the query is not parsed (query_dropped) */
    conn_guard_limits guard;  /* header, body and request deadlines; max connections */
    /* numeric addresses or CIDR ranges, comma-separated, of proxies whose X-Forwarded-For names
     * the client (for the per-client cap and http_exchange_client_address); NULL or "": none */
    const char *trusted_proxies;
} http_limits;

/* A ready `message` handler: the library's message as one log line, "refused by the HTTP library"
 * with the status it sent, or "HTTP library". Its refusals are answered with its fixed HTML
 * bodies, and some come before the request line is read, so no request exists for them: this
 * line, with the status, is their record. */
void http_log_library_message(void *ctx, int status, const char *text);

/* Whether listen_on has the shape http_server_start takes (HOST:PORT, [IPV6]:PORT or :PORT, a
 * port 0-65535), so a command line can refuse a malformed one as a usage error; when it has
 * not, err says so. It does not resolve the host. */
bool http_listen_address_valid(const char *listen_on, char *err, size_t errlen);

/* Whether list is what http_limits.trusted_proxies takes; when it is not, err says so. */
bool http_trusted_proxies_valid(const char *list, char *err, size_t errlen);

/* Listens on listen_on (HOST:PORT, [IPV6]:PORT or :PORT; exclusive, no SO_REUSEPORT) and writes
 * the address it got back into it (port 0 picks one). NULL with err set when it cannot. */
http_server *http_server_start(char *listen_on, size_t listen_cap, const http_limits *limits,
                               const http_handlers *handlers, char *err, size_t errlen);
/* Stops accepting connections; those open go on. */
void http_server_quiesce(http_server *s);
/* Closes every connection and stops. */
void http_server_stop(http_server *s);

/* A request header or query argument by name (NULL when absent). */
const char *http_exchange_header(http_exchange *ex, const char *name);
const char *http_exchange_query(http_exchange *ex, const char *name);
/* The headers or query arguments in order, with their lengths (a header value the library cut
 * at a NUL is flagged cut_at_nul). False when there were more than cap: out holds the first cap. */
bool http_exchange_headers(http_exchange *ex, http_field *out, size_t cap, size_t *n);
bool http_exchange_query_args(http_exchange *ex, http_field *out, size_t cap, size_t *n);
/* The client's address, numeric: the peer's, or behind a trusted proxy the one its
 * X-Forwarded-For names; false when unknown. */
bool http_exchange_client_address(http_exchange *ex, char *out, size_t cap);
/* The connection's peer, numeric (behind a proxy, the proxy's); false when unknown. */
bool http_exchange_peer_address(http_exchange *ex, char *out, size_t cap);
/* Whether the request crossed a network in clear: plain HTTP from a peer that is neither
 * loopback nor a trusted proxy (which terminates TLS in front of payd). */
bool http_exchange_in_clear_from_afar(http_exchange *ex);

/* Headers complete: the body deadline starts. request_id goes into the 408 if it passes. */
void http_exchange_body_deadline(http_exchange *ex, const char *request_id);
/* The body deadline passed and the guard answered 408 itself. */
bool http_exchange_timed_out(http_exchange *ex);
/* The status the library sent itself (a request it refused), or 0. */
int http_exchange_library_status(http_exchange *ex);

/* The answer: status, body (malloc'd, taken; NULL: none) and up to HTTP_MAX_ANSWER_HEADERS
 * headers (the array is copied; its strings must live until the exchange completes). Any thread
 * serving the request may give it; the library's response is made from it when the exchange is
 * next served, on the connection's own thread, which also frees it: a writer thread that made
 * it had its memory freed by another thread, and that thread waited on the writer's malloc
 * arena (~900 times in 3 s of fresh-key payments, over a quarter of the HTTP threads' sleeps). */
#define HTTP_MAX_ANSWER_HEADERS 24
typedef struct http_response {
    int status;
    char *body;
    size_t len;
    const http_header *headers;
    size_t header_count;
} http_response;
void http_exchange_respond(http_exchange *ex, const http_response *r);
/* Instead of an answer: the connection is closed without a word, which a client cannot tell
 * from a peer that crashed. For test servers that play one (the processor simulator). */
void http_exchange_drop(http_exchange *ex);
/* Waits: the connection's thread serves others until http_exchange_resume (any thread, once the
 * answer is given). After resume the exchange belongs to its connection's thread again. */
void http_exchange_suspend(http_exchange *ex);
void http_exchange_resume(http_exchange *ex);

#endif

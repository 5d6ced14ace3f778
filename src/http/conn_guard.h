#ifndef PAYD_HTTP_CONN_GUARD_H
#define PAYD_HTTP_CONN_GUARD_H
/* Deadlines libmicrohttpd does not have. Its connection timeout only measures silence, so a
 * client sending one byte every few seconds is never idle and never cut off. The guard gives
 * every request three deadlines:
 *   - headers within --header-timeout: armed when the connection opens and after each answer;
 *     past it the socket is shut down (an idle keep-alive connection gets no unsolicited answer);
 *   - body within --body-timeout of the headers, and the whole request within
 *     --request-timeout: past either, the watchdog writes a 408 problem+json and closes. The
 *     request's own thread and the watchdog race for the body through one atomic phase, so
 *     exactly one of them answers.
 * It also counts open connections, in all and per client address: past --max-connections, or
 * past --max-connections-per-client from one client, a connection is marked, and the pipeline
 * answers its first request at once (503 or 429) instead of leaving it in the kernel queue; a
 * marked connection that sends no request is cut within a second. A connection over its
 * client's cap takes no place under the global cap, so one client's refused connections never
 * push another client's over it. Past REFUSALS_ANSWERED_PER_SECOND such answers in a second,
 * a client's further connections are closed as they are accepted (conn_guard_admit): a client
 * that re-opens as fast as it is refused costs an accept and a close each, not a request's
 * parse and answer, so it cannot take the CPU that serves everyone else. */
#include <stdbool.h>
#include <stdint.h>

typedef struct conn_guard conn_guard;
typedef struct guarded_conn guarded_conn;

typedef struct conn_guard_limits {
    int64_t header_timeout_ms, body_timeout_ms, request_timeout_ms;
    int64_t max_connections;
    int64_t max_connections_per_client; /* 0: no cap per client */
} conn_guard_limits;

conn_guard *conn_guard_start(const conn_guard_limits *limits);
void conn_guard_stop(conn_guard *g);
/* client: the peer's numeric address, counted against the per-client cap; NULL for a trusted
 * proxy, whose requests name their client (conn_guard_attribute). */
guarded_conn *conn_guard_open(conn_guard *g, int fd, const char *client);
void conn_guard_close(conn_guard *g, guarded_conn *c);
/* Called as a connection is accepted, before a byte is read: false when `client` (the peer's
 * numeric address; not a trusted proxy) is at its cap and has had its answered refusals this
 * second, so the connection is closed at once. The first such close of a second is logged. */
bool conn_guard_admit(conn_guard *g, const char *client);
/* This connection was opened past --max-connections. */
bool conn_guard_over_limit(const guarded_conn *c);
/* Counts the connection for `client` from now on (a request through a trusted proxy names its
 * client), in place of whoever it was counted for; marks it if that client is over its cap. */
void conn_guard_attribute(conn_guard *g, guarded_conn *c, const char *client);
/* This connection is past its client's cap. */
bool conn_guard_over_client_limit(const guarded_conn *c);
/* Headers complete: the body deadline starts. request_id goes into the 408 if it fires. */
void conn_guard_headers_done(conn_guard *g, guarded_conn *c, const char *request_id);
/* The body is complete and the caller will answer. False when the watchdog answered 408 first:
 * the caller must not answer and should drop the connection. */
bool conn_guard_body_done(guarded_conn *c);
/* The watchdog answered this request 408. */
bool conn_guard_timed_out(const guarded_conn *c);
/* After an answer: the next request on the connection gets its own header deadline. */
void conn_guard_rearm(conn_guard *g, guarded_conn *c);

#endif

#ifndef PAYD_HTTP_CONN_GUARD_H
#define PAYD_HTTP_CONN_GUARD_H
/* The slowloris guard. libmicrohttpd's connection timeout only measures silence, so a client
 * that sends one header byte a second is never idle and never cut off. This guard gives every
 * request a deadline for its headers (--header-timeout): armed when the connection opens and
 * after each response, disarmed when a request's headers are complete. A watchdog thread shuts
 * down the socket of any connection past its deadline. */
#include <stdint.h>

struct MHD_Connection;
typedef struct conn_guard conn_guard;
typedef struct guarded_conn guarded_conn;

conn_guard *conn_guard_start(int64_t header_timeout_ms);
void conn_guard_stop(conn_guard *g);
guarded_conn *conn_guard_open(conn_guard *g, int fd);
void conn_guard_close(conn_guard *g, guarded_conn *c);
void conn_guard_headers_done(guarded_conn *c);
void conn_guard_rearm(conn_guard *g, guarded_conn *c);

#endif

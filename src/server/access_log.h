#ifndef PAYD_SERVER_ACCESS_LOG_H
#define PAYD_SERVER_ACCESS_LOG_H
/* The access log, written off the request path: a request leaves a small record in a buffer,
 * and one thread turns the records into JSON lines and writes them, many per write(2), every
 * few milliseconds. A full buffer never drops a line: the request then writes its own.
 * Records not yet written when the process is killed are lost, as an nginx buffered access log
 * loses its buffer; failures have their own line, written at once (core/log.h). */
#include <stdbool.h>
#include <stdint.h>

typedef struct access_record {
    int64_t at_us; /* when the request ended, wall clock */
    int64_t duration_us;
    int status;       /* 0: the client left before any answer was sent */
    uint64_t user_id; /* 0: not authenticated; the live user for a test key too */
    int livemode;     /* the key's mode (docs/modes.md): 1 live, 0 test, -1 not authenticated */
    /* "new", "replayed", "in_flight" or "reused"; NULL: no Idempotency-Key was used. A string
     * that lives forever, like route and code. */
    const char *idempotency;
    const char *route; /* the route's pattern or "unmatched" */
    const char *code;  /* the problem code of a 4xx or 5xx; NULL otherwise */
    const char *request_id;
    const char *method; /* copied into the record; NULL: never read */
    /* copied into the record (the user agent cut to ACCESS_LOG_AGENT_MAX bytes); NULL or "":
     * none */
    const char *client_ip, *forwarded_for, *user_agent;
    int64_t bytes_in, bytes_out; /* body bytes received and answered */
} access_record;

#define ACCESS_LOG_AGENT_MAX 200

void access_log_start(void);
/* Copies what it needs of r: the caller's strings may go away at once. */
void access_log_record(const access_record *r);
/* Writes everything recorded and stops the thread. */
void access_log_stop(void);

#endif

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
    int status;        /* 0: the client left before any answer was sent */
    uint64_t user_id;  /* 0: not authenticated */
    bool replayed;     /* an idempotent replay */
    const char *route; /* the route's pattern or "unmatched": a string that lives forever */
    const char *request_id;
    const char *method; /* copied into the record; NULL: never read */
} access_record;

void access_log_start(void);
/* Copies what it needs of r: the caller's strings may go away at once. */
void access_log_record(const access_record *r);
/* Writes everything recorded and stops the thread. */
void access_log_stop(void);

#endif

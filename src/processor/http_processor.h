#ifndef PAYD_PROCESSOR_HTTP_PROCESSOR_H
#define PAYD_PROCESSOR_HTTP_PROCESSOR_H
/* `--processor http://HOST:PORT`: the §5 processor protocol over HTTP with libcurl.
 * A timeout, a 5xx or a dropped connection is PROC_UNAVAILABLE (in doubt). Creating one starts
 * the thread that carries started charges and refunds; freeing it stops that thread. */
#include <stdint.h>

#include "processor/processor.h"

typedef struct http_processor http_processor;

http_processor *http_processor_create(const char *base_url, int64_t timeout_ms);
void http_processor_free(http_processor *p);
proc_result http_processor_charge(http_processor *p, const char *key, int64_t amount,
                                  const char *currency, const char *source);
/* The same charge without blocking: done(result, DB_FAILURE_NONE, arg) runs once, on the
 * processor's own thread when the answer (or the timeout) comes, or at once when the call cannot
 * be made. done must not block: that thread carries every other started charge. The strings
 * are copied. */
void http_processor_charge_start(http_processor *p, const char *key, int64_t amount,
                                 const char *currency, const char *source,
                                 processor_charge_done done, void *arg);
proc_result http_processor_find_charge(http_processor *p, const char *key);
proc_result http_processor_refund(http_processor *p, const char *key, const char *charge_id,
                                  int64_t amount);
/* The same refund without blocking, as http_processor_charge_start. */
void http_processor_refund_start(http_processor *p, const char *key, const char *charge_id,
                                 int64_t amount, processor_charge_done done, void *arg);

/* Holds (docs/api.md §17): POST /charges with "capture": false; POST /charges/{id}/capture
 * {amount, final, release}; POST /charges/{id}/release {amount}; GET /charges/{id}. */
proc_result http_processor_authorize(http_processor *p, const char *key, int64_t amount,
                                     const char *currency, const char *source);
proc_result http_processor_capture(http_processor *p, const char *key, const char *charge_id,
                                   int64_t amount, int64_t release);
proc_result http_processor_release(http_processor *p, const char *key, const char *charge_id,
                                   int64_t amount);
proc_hold http_processor_hold(http_processor *p, const char *charge_id);

/* `payd processor-sim [--listen HOST:PORT] [--db PATH] [--latency-ms N] [--fail-before P]
 * [--fail-after P] [--seed N]`: serves the protocol from the simulator. Returns an exit code. */
int processor_sim_main(int argc, char **argv);

#endif

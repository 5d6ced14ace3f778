#ifndef PAYD_CORE_LOG_H
#define PAYD_CORE_LOG_H
/* payd's log: one JSON object per line on stderr, every line built by the one JSON writer, so
 * every value is escaped, nothing is cut, and each line carries `time` and `level`.
 *
 *     jsonw w;
 *     log_begin(&w, "error", "processor call failed");
 *     jw_key(&w, "request_id"); jw_string(&w, id);
 *     log_end(&w);
 */
#include "core/jsonw.h"

/* Starts a line: time, level, msg, and the request id of the request this thread is serving,
 * if any (see log_set_request_id). */
void log_begin(jsonw *w, const char *level, const char *msg);
/* Starts a line about the given request, naming it in place of the thread's: for code that runs
 * for a request before its thread takes it up (the idempotency claim) or on the recoverer's
 * thread (NULL: no request_id field). */
void log_begin_request(jsonw *w, const char *level, const char *msg, const char *request_id);
/* Closes the object and writes the line with one write(2), so lines from threads never mix. */
void log_end(jsonw *w);
/* For writers of many lines at once (the access log): opens a line's object in w, which may
 * already hold whole lines, stamped with the given time (µs, wall clock); the caller closes it
 * with jw_object_end and jw_end_line. log_write then writes all of w with one write(2). */
void log_open_line(jsonw *w, int64_t at_us, const char *level, const char *msg,
                   const char *request_id);
void log_write(jsonw *w);
/* The request this thread now serves (NULL: none): every line it logs names the request, so a
 * failure deep in the store or the processor client is tied to the request that met it. */
void log_set_request_id(const char *request_id);
/* The request this thread now serves (NULL: none), for work it hands to another thread. */
const char *log_request_id(void);
/* --log-level: lines below `level` (debug, info, warn, error) are not written. False for
 * another word. Call it once, before any other thread logs. */
bool log_set_level(const char *level);
bool log_level_known(const char *level);
/* Whether a line of this level is written (for writers that build many at once). */
bool log_level_enabled(const char *level);
/* A line with only a message. */
void log_msg(const char *level, const char *msg);
/* A line with a message and the error text that explains it (NULL: no error field). */
void log_error(const char *level, const char *msg, const char *error);

#endif

#include "core/log.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/timefmt.h"

static _Thread_local const char *current_request_id;

/* --log-level, lowest first; a line's level is one of these words. */
static const char *const level_names[] = {"debug", "info", "warn", "error"};
#define LEVEL_COUNT (int)(sizeof level_names / sizeof level_names[0])
static int least_level = 1; /* info; set once at start, before any thread logs */

static int level_rank(const char *level, size_t len)
{
    for (int i = 0; i < LEVEL_COUNT; i++)
        if (strlen(level_names[i]) == len && !strncmp(level_names[i], level, len))
            return i;
    return LEVEL_COUNT - 1; /* a word not in the list is written, as an error would be */
}

bool log_set_level(const char *level)
{
    for (int i = 0; i < LEVEL_COUNT; i++)
        if (!strcmp(level_names[i], level)) {
            least_level = i;
            return true;
        }
    return false;
}

bool log_level_known(const char *level)
{
    for (int i = 0; i < LEVEL_COUNT; i++)
        if (!strcmp(level_names[i], level))
            return true;
    return false;
}

bool log_level_enabled(const char *level)
{
    return level_rank(level, strlen(level)) >= least_level;
}

/* The level of a line log_open_line began in w: the value of its "level" member. */
static bool line_enabled(const jsonw *w)
{
    static const char marker[] = "\"level\":\"";
    const char *at = w->buf ? strstr(w->buf, marker) : NULL;
    if (!at)
        return true;
    at += sizeof marker - 1;
    return level_rank(at, strcspn(at, "\"")) >= least_level;
}

void log_set_request_id(const char *request_id)
{
    current_request_id = request_id;
}

const char *log_request_id(void)
{
    return current_request_id;
}

void log_open_line(jsonw *w, int64_t at_us, const char *level, const char *msg,
                   const char *request_id)
{
    char when[32];
    format_rfc3339_ms(at_us, when);
    jw_object_begin(w);
    jw_key(w, "time");
    jw_string(w, when);
    jw_key(w, "level");
    jw_string(w, level);
    jw_key(w, "msg");
    jw_string(w, msg);
    if (request_id) {
        jw_key(w, "request_id");
        jw_string(w, request_id);
    }
}

void log_begin_request(jsonw *w, const char *level, const char *msg, const char *request_id)
{
    jw_init(w);
    log_open_line(w, now_us(), level, msg, request_id);
}

void log_begin(jsonw *w, const char *level, const char *msg)
{
    log_begin_request(w, level, msg, current_request_id);
}

void log_write(jsonw *w)
{
    size_t len;
    char *text = jw_take(w, &len);
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(STDERR_FILENO, text + done, len - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    free(text);
}

void log_end(jsonw *w)
{
    if (!line_enabled(w)) {
        jw_free(w);
        return;
    }
    jw_object_end(w);
    jw_end_line(w);
    log_write(w);
}

void log_msg(const char *level, const char *msg)
{
    jsonw w;
    log_begin(&w, level, msg);
    log_end(&w);
}

void log_error(const char *level, const char *msg, const char *error)
{
    jsonw w;
    log_begin(&w, level, msg);
    if (error) {
        jw_key(&w, "error");
        jw_string(&w, error);
    }
    log_end(&w);
}

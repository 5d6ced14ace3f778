#include "server/access_log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/ids.h"
#include "core/jsonw.h"
#include "core/log.h"

#define CAPACITY       8192 /* records per buffer: ~1/10 s of the fastest route */
#define FLUSH_EVERY_MS 10
#define SHORT_METHOD   16 /* longer methods (hostile ones) are copied to the heap */
#define REQUEST_ID_CAP 129

#define ADDRESS_CAP 48

typedef struct stored_record {
    access_record r;
    char request_id[REQUEST_ID_CAP];
    char method[SHORT_METHOD];
    char *long_method;
    char client_ip[ADDRESS_CAP], forwarded_for[ADDRESS_CAP];
    char user_agent[ACCESS_LOG_AGENT_MAX + 1];
} stored_record;

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    bool running, stopping;
    stored_record *active, *spare; /* requests fill active; the thread writes spare */
    int count;
} L = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* Microseconds as milliseconds with three decimals ("12.345"), by hand: the access log's thread
 * writes one per request, and a floating-point printf costs more than the rest of the line. */
static void format_us_as_ms(int64_t us, char out[32])
{
    char digits[24];
    int n = 0;
    uint64_t v = us < 0 ? 0 : (uint64_t)us;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v || n < 4); /* at least "0.000" */
    int o = 0;
    while (n > 3)
        out[o++] = digits[--n];
    out[o++] = '.';
    while (n > 0)
        out[o++] = digits[--n];
    out[o] = '\0';
}

/* The line format: one JSON object through the one log writer, every value escaped. */
static const char *level_of(const access_record *r)
{
    return r->status >= 500 ? "error" : "info";
}

static void format_line(jsonw *w, const access_record *r)
{
    log_open_line(w, r->at_us, level_of(r), "request", r->request_id);
    jw_key(w, "method");
    jw_string(w, r->method);
    jw_key(w, "route");
    jw_string(w, r->route);
    jw_key(w, "status");
    if (r->status)
        jw_int(w, r->status);
    else
        jw_null(w);
    jw_key(w, "duration_ms");
    char ms[32];
    format_us_as_ms(r->duration_us, ms);
    jw_raw(w, ms, "0");
    jw_key(w, "user_id");
    if (r->user_id) {
        char user[ID_STR_MAX];
        id_format(r->user_id, "usr", user);
        jw_string(w, user);
    } else {
        jw_null(w);
    }
    jw_key(w, "livemode");
    if (r->livemode >= 0)
        jw_bool(w, r->livemode == 1);
    else
        jw_null(w);
    jw_key(w, "code");
    jw_string(w, r->code);
    jw_key(w, "client_ip");
    jw_string(w, r->client_ip && r->client_ip[0] ? r->client_ip : NULL);
    if (r->forwarded_for && r->forwarded_for[0]) {
        jw_key(w, "forwarded_for");
        jw_string(w, r->forwarded_for);
    }
    jw_key(w, "user_agent");
    jw_string(w, r->user_agent);
    jw_member_int(w, "bytes_in", r->bytes_in);
    jw_member_int(w, "bytes_out", r->bytes_out);
    if (r->idempotency) {
        jw_key(w, "idempotency");
        jw_string(w, r->idempotency);
    }
    jw_object_end(w);
    jw_end_line(w);
}

static void write_one(const access_record *r)
{
    if (!log_level_enabled(level_of(r)))
        return;
    jsonw w;
    jw_init(&w);
    format_line(&w, r);
    log_write(&w);
}

/* Formats a whole buffer into one text and writes it at once. */
static void write_batch(stored_record *recs, int n)
{
    jsonw all;
    jw_init(&all);
    for (int i = 0; i < n; i++) {
        if (log_level_enabled(level_of(&recs[i].r)))
            format_line(&all, &recs[i].r);
        free(recs[i].long_method);
    }
    log_write(&all);
}

static void *writer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&L.lock);
    for (;;) {
        if (!L.count && L.stopping)
            break;
        if (!L.count || (L.count < CAPACITY / 2 && !L.stopping)) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += FLUSH_EVERY_MS * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&L.wake, &L.lock, &until);
        }
        int n = L.count;
        if (!n)
            continue;
        stored_record *full = L.active;
        L.active = L.spare;
        L.spare = full;
        L.count = 0;
        pthread_mutex_unlock(&L.lock);
        write_batch(full, n);
        pthread_mutex_lock(&L.lock);
    }
    pthread_mutex_unlock(&L.lock);
    return NULL;
}

void access_log_start(void)
{
    L.active = calloc(CAPACITY, sizeof *L.active);
    L.spare = calloc(CAPACITY, sizeof *L.spare);
    L.count = 0;
    L.stopping = false;
    L.running = pthread_create(&L.thread, NULL, writer_main, NULL) == 0;
}

/* text copied into a record's own buffer (cut to it); NULL stays NULL */
static const char *copy_into(char *buffer, size_t cap, const char *text)
{
    if (!text)
        return NULL;
    size_t n = strnlen(text, cap - 1); /* by hand: a snprintf per field cost more than the copy */
    memcpy(buffer, text, n);
    buffer[n] = '\0';
    return buffer;
}

void access_log_record(const access_record *r)
{
    pthread_mutex_lock(&L.lock);
    if (!L.running || L.count == CAPACITY) {
        pthread_mutex_unlock(&L.lock);
        write_one(r); /* the thread is behind (or gone): this request writes its own line */
        return;
    }
    stored_record *s = &L.active[L.count++];
    s->r = *r;
    s->r.request_id = copy_into(s->request_id, sizeof s->request_id, r->request_id);
    s->r.client_ip = copy_into(s->client_ip, sizeof s->client_ip, r->client_ip);
    s->r.forwarded_for = copy_into(s->forwarded_for, sizeof s->forwarded_for, r->forwarded_for);
    s->r.user_agent = copy_into(s->user_agent, sizeof s->user_agent, r->user_agent);
    size_t mlen = r->method ? strlen(r->method) : 0;
    s->long_method = NULL;
    if (!r->method) {
        s->r.method = NULL; /* the library refused the request before its method was read */
    } else if (mlen < SHORT_METHOD) {
        memcpy(s->method, r->method, mlen + 1);
        s->r.method = s->method;
    } else {
        s->r.method = s->long_method = strdup(r->method);
    }
    if (L.count == CAPACITY / 2)
        pthread_cond_signal(&L.wake);
    pthread_mutex_unlock(&L.lock);
}

void access_log_stop(void)
{
    if (!L.running)
        return;
    pthread_mutex_lock(&L.lock);
    L.stopping = true;
    pthread_cond_signal(&L.wake);
    pthread_mutex_unlock(&L.lock);
    pthread_join(L.thread, NULL);
    L.running = false;
    free(L.active);
    free(L.spare);
    L.active = L.spare = NULL;
}

/* A scripted HTTP server for the client's unit tests: a small libmicrohttpd daemon bound to
 * 127.0.0.1 port 0 (the real port is read back), answering each request with the next step of a
 * script (the last step repeats) or with whatever a responder function decides, and recording
 * every request it saw. A step can also drop the connection without answering, or hang.
 *
 * Included by each client test program; it is small enough not to need a library of its own. */
#ifndef PAYD_TEST_SCRIPTED_SERVER_H
#define PAYD_TEST_SCRIPTED_SERVER_H

#include <arpa/inet.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum script_action {
    SCRIPT_REPLY, /* answer with status, headers and body */
    SCRIPT_DROP,  /* close the connection without any answer */
    SCRIPT_HANG,  /* wait hang_ms, then answer as SCRIPT_REPLY */
} script_action;

typedef struct script_step {
    script_action action;
    int status;
    const char *code;        /* error answers: the problem's code (default "scripted_error") */
    const char *body;        /* NULL: a problem for errors, a small payment for successes */
    const char *retry_after; /* Retry-After value, or NULL */
    const char *header_name; /* one more header, or NULL */
    const char *header_value;
    int hang_ms;
} script_step;

typedef struct seen_request {
    char method[16];
    char path[512];   /* as sent (still percent-encoded) */
    char query[1024]; /* "name=value&..." as sent (still percent-encoded) */
    char idempotency_key[300];
    char authorization[300];
    char content_type[128];
    char if_match[128];
    char body[8192];
    size_t body_len;
} seen_request;

typedef struct scripted_server scripted_server;
/* Decides the answer to req; may point out->body at s->responder_body. */
typedef void (*script_responder)(scripted_server *s, const seen_request *req, script_step *out);

struct scripted_server {
    struct MHD_Daemon *daemon;
    int port;
    char url[64];
    pthread_mutex_t lock;
    const script_step *steps;
    size_t step_count;
    size_t next_step;
    script_responder responder;
    char responder_body[8192];
    seen_request seen[64];
    size_t seen_count;
    atomic_bool stopping; /* set before the daemon stops, so hanging handlers let go */
};

static void scripted_copy_header(struct MHD_Connection *conn, const char *name, char *dst,
                                 size_t size)
{
    const char *value = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
    snprintf(dst, size, "%s", value ? value : "");
}

static enum MHD_Result scripted_collect_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                            const char *value)
{
    seen_request *req = cls;
    size_t used = strlen(req->query);
    snprintf(req->query + used, sizeof req->query - used, "%s%s=%s", used ? "&" : "", key,
             value ? value : "");
    return MHD_YES;
}

static void scripted_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static enum MHD_Result scripted_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                           const char *method, const char *version,
                                           const char *upload_data, size_t *upload_data_size,
                                           void **con_cls)
{
    scripted_server *s = cls;
    seen_request *req = *con_cls;
    if (!req) { /* first call: headers only */
        req = calloc(1, sizeof *req);
        if (!req)
            return MHD_NO;
        snprintf(req->method, sizeof req->method, "%s", method);
        snprintf(req->path, sizeof req->path, "%s", url);
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, scripted_collect_arg, req);
        scripted_copy_header(conn, "Idempotency-Key", req->idempotency_key,
                             sizeof req->idempotency_key);
        scripted_copy_header(conn, "Authorization", req->authorization, sizeof req->authorization);
        scripted_copy_header(conn, "Content-Type", req->content_type, sizeof req->content_type);
        scripted_copy_header(conn, "If-Match", req->if_match, sizeof req->if_match);
        *con_cls = req;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t room = sizeof req->body - 1 - req->body_len;
        size_t n = *upload_data_size < room ? *upload_data_size : room;
        memcpy(req->body + req->body_len, upload_data, n);
        req->body_len += n;
        *upload_data_size = 0;
        return MHD_YES;
    }

    script_step step = {.action = SCRIPT_REPLY, .status = 200};
    pthread_mutex_lock(&s->lock);
    if (s->seen_count < sizeof s->seen / sizeof s->seen[0])
        s->seen[s->seen_count] = *req;
    s->seen_count++;
    if (s->responder) {
        s->responder(s, req, &step);
    } else if (s->step_count) {
        step = s->steps[s->next_step];
        if (s->next_step + 1 < s->step_count)
            s->next_step++;
    }
    char body[8192];
    if (step.body)
        snprintf(body, sizeof body, "%s", step.body);
    else if (step.status >= 400)
        snprintf(body, sizeof body,
                 "{\"type\":\"about:blank\",\"title\":\"Scripted\",\"status\":%d,"
                 "\"detail\":\"scripted failure\",\"code\":\"%s\"}",
                 step.status, step.code ? step.code : "scripted_error");
    else
        snprintf(body, sizeof body, "{\"id\":\"pay_test\",\"object\":\"payment\"}");
    size_t seen_number = s->seen_count;
    pthread_mutex_unlock(&s->lock);

    if (step.action == SCRIPT_DROP)
        return MHD_NO; /* libmicrohttpd closes the connection without answering */
    for (int waited = 0; step.action == SCRIPT_HANG && waited < step.hang_ms && !s->stopping;
         waited += 10)
        scripted_sleep_ms(10);

    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(response, "Content-Type",
                            step.status >= 400 ? "application/problem+json" : "application/json");
    char request_id[32];
    snprintf(request_id, sizeof request_id, "req_%zu", seen_number);
    MHD_add_response_header(response, "X-Request-Id", request_id);
    if (step.retry_after)
        MHD_add_response_header(response, "Retry-After", step.retry_after);
    if (step.header_name)
        MHD_add_response_header(response, step.header_name, step.header_value);
    enum MHD_Result queued = MHD_queue_response(conn, (unsigned)step.status, response);
    MHD_destroy_response(response);
    return queued;
}

/* Keep the path and query exactly as the client sent them, so tests see its escaping. */
static size_t scripted_keep_escaped(void *cls, struct MHD_Connection *conn, char *text)
{
    return strlen(text);
}

static void scripted_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                                  enum MHD_RequestTerminationCode why)
{
    free(*con_cls);
    *con_cls = NULL;
}

/* Starts a server that follows `steps` (may be NULL when a responder is set later). */
static int scripted_start(scripted_server *s, const script_step *steps, size_t step_count)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    s->steps = steps;
    s->step_count = step_count;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
                                 NULL, NULL, scripted_on_request, s, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED,
                                 scripted_on_completed, NULL, MHD_OPTION_UNESCAPE_CALLBACK,
                                 scripted_keep_escaped, NULL, MHD_OPTION_END);
    if (!s->daemon)
        return -1;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : 0;
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%d", s->port);
    return s->port > 0 ? 0 : -1;
}

static void scripted_stop(scripted_server *s)
{
    s->stopping = true;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    pthread_mutex_destroy(&s->lock);
}

static size_t scripted_seen(scripted_server *s)
{
    pthread_mutex_lock(&s->lock);
    size_t n = s->seen_count;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* ---- time hooks that never wait: sleeping only moves the fake clocks forward ---- */

typedef struct fake_time {
    int64_t monotonic_ms;
    int64_t wall_ms;
    int64_t sleeps[64];
    int sleep_count;
} fake_time;

static int64_t fake_monotonic_ms(void *ctx)
{
    return ((fake_time *)ctx)->monotonic_ms;
}

static int64_t fake_wall_clock_ms(void *ctx)
{
    return ((fake_time *)ctx)->wall_ms;
}

static void fake_sleep_ms(void *ctx, int64_t ms)
{
    fake_time *t = ctx;
    if (t->sleep_count < 64)
        t->sleeps[t->sleep_count] = ms;
    t->sleep_count++;
    t->monotonic_ms += ms;
    t->wall_ms += ms;
}

/* 2026-10-12T08:31:07Z, a Monday: the fake wall clock's start, so HTTP-dates are exact. */
#define FAKE_WALL_START_MS 1791793867000LL

static void fake_time_install(payd_client *client, fake_time *t)
{
    memset(t, 0, sizeof *t);
    t->monotonic_ms = 1000000;
    t->wall_ms = FAKE_WALL_START_MS;
    payd_time_hooks hooks = {.monotonic_ms = fake_monotonic_ms,
                             .wall_clock_ms = fake_wall_clock_ms,
                             .sleep_ms = fake_sleep_ms,
                             .ctx = t};
    payd_client_set_time_hooks(client, &hooks);
}

/* A scripted server and a client pointed at it, on the fake clock. The tests include cmocka
 * and payd/client.h before this header. */
#define FIXTURE_API_KEY "sk_test_123"

typedef struct fixture {
    scripted_server server;
    payd_client *client;
    fake_time time;
    payd_result result;
} fixture;

/* responder may be NULL: the script alone answers. */
static fixture *start(const script_step *steps, size_t step_count, script_responder responder)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(scripted_start(&f->server, steps, step_count), 0);
    f->server.responder = responder;
    f->client = payd_client_new(f->server.url, FIXTURE_API_KEY);
    assert_non_null(f->client);
    fake_time_install(f->client, &f->time);
    return f;
}

static void finish(fixture *f)
{
    payd_result_clear(&f->result);
    payd_client_free(f->client);
    scripted_stop(&f->server);
    free(f);
}

#endif

/* The HTTP processor client: a started charge (one libcurl multi loop on the client's own
 * thread) sends what the blocking call sends and reads the answer the same way; many run at
 * once; a silent processor times out; and freeing the client ends a charge still in flight as
 * PROC_UNAVAILABLE, calling back exactly once. */
#include <arpa/inet.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "processor/http_processor.h"

#define OVERLAP 32 /* started charges the overlap test holds until all have arrived */

/* ---- a processor that answers by the charge's source ---- */

typedef struct fake_processor {
    struct MHD_Daemon *daemon;
    char url[64];
    pthread_mutex_t lock;
    pthread_cond_t arrived;
    int charges;           /* POST /charges seen */
    char last_key[300];    /* the last Idempotency-Key */
    char last_type[128];   /* the last Content-Type */
    bool hold_for_overlap; /* answer tok_overlap only once OVERLAP charges are in */
    char last_url[128];    /* the last path */
    char last_body[512];   /* the last body */
} fake_processor;

typedef struct body_buf {
    char data[4096];
    size_t len;
} body_buf;

static void copy_header(struct MHD_Connection *conn, const char *name, char *dst, size_t size)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
    snprintf(dst, size, "%s", v ? v : "");
}

static enum MHD_Result answer(struct MHD_Connection *conn, unsigned status, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result rc = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return rc;
}

/* Holds the caller until OVERLAP charges have arrived: true when they all did in time. */
static bool wait_for_overlap(fake_processor *f)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&f->lock);
    pthread_cond_broadcast(&f->arrived);
    int rc = 0;
    while (f->charges < OVERLAP && rc == 0)
        rc = pthread_cond_timedwait(&f->arrived, &f->lock, &until);
    bool all = f->charges >= OVERLAP;
    pthread_mutex_unlock(&f->lock);
    return all;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **con_cls)
{
    fake_processor *f = cls;
    body_buf *b = *con_cls;
    if (!b) {
        *con_cls = calloc(1, sizeof *b);
        return *con_cls ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        size_t n =
            *upload_size < sizeof b->data - 1 - b->len ? *upload_size : sizeof b->data - 1 - b->len;
        memcpy(b->data + b->len, upload, n);
        b->len += n;
        *upload_size = 0;
        return MHD_YES;
    }
    if (!strcmp(method, "POST") && !strncmp(url, "/charges/", 9)) {
        /* holds (§17): ch_hold captures and releases, ch_full refuses, ch_down fails */
        pthread_mutex_lock(&f->lock);
        snprintf(f->last_url, sizeof f->last_url, "%s", url);
        snprintf(f->last_body, sizeof f->last_body, "%.*s", (int)b->len, b->data);
        copy_header(conn, "Idempotency-Key", f->last_key, sizeof f->last_key);
        pthread_mutex_unlock(&f->lock);
        if (!strncmp(url, "/charges/ch_hold/", 17))
            return answer(conn, 200, "{\"id\":\"cp_1\",\"status\":\"succeeded\"}");
        if (!strncmp(url, "/charges/ch_full/", 17))
            return answer(conn, 409, "{\"error\":\"hold_exceeded\"}");
        if (!strncmp(url, "/charges/ch_down/", 17))
            return answer(conn, 500, "{\"error\":\"processor_unavailable\"}");
        return answer(conn, 404, "{\"error\":\"not_found\"}");
    }
    if (strcmp(method, "POST") != 0 || strcmp(url, "/charges") != 0)
        return answer(conn, 404, "{}");
    pthread_mutex_lock(&f->lock);
    f->charges++;
    copy_header(conn, "Idempotency-Key", f->last_key, sizeof f->last_key);
    copy_header(conn, "Content-Type", f->last_type, sizeof f->last_type);
    pthread_mutex_unlock(&f->lock);

    json_t *body = json_loadb(b->data, b->len, 0, NULL);
    const char *source = json_string_value(json_object_get(body, "source"));
    char src[64];
    snprintf(src, sizeof src, "%s", source ? source : "");
    json_decref(body);
    if (!strcmp(src, "tok_visa"))
        return answer(conn, 200, "{\"id\":\"ch_approved\",\"status\":\"succeeded\"}");
    if (!strcmp(src, "tok_hold"))
        return answer(conn, 200, "{\"id\":\"ch_hold\",\"status\":\"authorized\"}");
    if (!strcmp(src, "tok_chargeDeclined"))
        return answer(conn, 200,
                      "{\"id\":\"ch_declined\",\"status\":\"declined\","
                      "\"decline_code\":\"generic_decline\"}");
    if (!strcmp(src, "tok_garbage"))
        return answer(conn, 200, "not the protocol");
    if (!strcmp(src, "tok_overlap"))
        return wait_for_overlap(f)
                   ? answer(conn, 200, "{\"id\":\"ch_overlap\",\"status\":\"succeeded\"}")
                   : answer(conn, 503, "{}");
    return answer(conn, 500, "{\"error\":\"processor_unavailable\"}");
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode why)
{
    free(*con_cls);
    *con_cls = NULL;
}

static void fake_start(fake_processor *f)
{
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->arrived, NULL);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    f->daemon =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL,
                         NULL, on_request, f, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                         MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    assert_non_null(f->daemon);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(f->daemon, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(info);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%u/", (unsigned)info->port);
}

static void fake_stop(fake_processor *f)
{
    MHD_stop_daemon(f->daemon);
    pthread_cond_destroy(&f->arrived);
    pthread_mutex_destroy(&f->lock);
}

/* ---- a processor that reads requests and never answers ---- */

typedef struct silent_processor {
    int listener;
    char url[64];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t read_one;
    int requests; /* requests whose headers arrived */
    int conns[16];
    int conn_count;
} silent_processor;

static void *silent_accept(void *arg)
{
    silent_processor *s = arg;
    for (;;) {
        int c = accept(s->listener, NULL, NULL);
        if (c < 0)
            return NULL;
        char buf[4096];
        size_t got = 0;
        ssize_t n;
        while (got < sizeof buf - 1 && (n = recv(c, buf + got, sizeof buf - 1 - got, 0)) > 0) {
            got += (size_t)n;
            buf[got] = '\0';
            if (strstr(buf, "\r\n\r\n"))
                break;
        }
        pthread_mutex_lock(&s->lock);
        if (s->conn_count < 16)
            s->conns[s->conn_count++] = c;
        else
            close(c);
        s->requests++;
        pthread_cond_broadcast(&s->read_one);
        pthread_mutex_unlock(&s->lock);
    }
}

static void silent_start(silent_processor *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->read_one, NULL);
    s->listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(s->listener, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(s->listener, 16), 0);
    socklen_t len = sizeof addr;
    getsockname(s->listener, (struct sockaddr *)&addr, &len);
    snprintf(s->url, sizeof s->url, "http://127.0.0.1:%u", (unsigned)ntohs(addr.sin_port));
    assert_int_equal(pthread_create(&s->thread, NULL, silent_accept, s), 0);
}

static void silent_wait_requests(silent_processor *s, int n)
{
    pthread_mutex_lock(&s->lock);
    while (s->requests < n)
        pthread_cond_wait(&s->read_one, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void silent_stop(silent_processor *s)
{
    shutdown(s->listener, SHUT_RDWR); /* wakes the accept() */
    pthread_join(s->thread, NULL);
    close(s->listener);
    for (int i = 0; i < s->conn_count; i++)
        close(s->conns[i]);
    pthread_cond_destroy(&s->read_one);
    pthread_mutex_destroy(&s->lock);
}

/* ---- what started charges call back with ---- */

typedef struct outcome {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int calls;
    proc_result last;
    int approved;
    bool failure_seen; /* a db_failure other than none */
    pthread_t thread;  /* of the last call */
} outcome;

static void outcome_init(outcome *o)
{
    memset(o, 0, sizeof *o);
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->changed, NULL);
}

static void outcome_destroy(outcome *o)
{
    pthread_cond_destroy(&o->changed);
    pthread_mutex_destroy(&o->lock);
}

static void on_done(proc_result r, db_failure failure, void *arg)
{
    outcome *o = arg;
    pthread_mutex_lock(&o->lock);
    o->calls++;
    o->last = r;
    o->approved += r.status == PROC_APPROVED;
    o->failure_seen |= failure != DB_FAILURE_NONE;
    o->thread = pthread_self();
    pthread_cond_broadcast(&o->changed);
    pthread_mutex_unlock(&o->lock);
}

static void outcome_wait(outcome *o, int calls)
{
    pthread_mutex_lock(&o->lock);
    while (o->calls < calls)
        pthread_cond_wait(&o->changed, &o->lock);
    pthread_mutex_unlock(&o->lock);
}

static proc_result started_charge(http_processor *p, const char *key, const char *source)
{
    outcome o;
    outcome_init(&o);
    http_processor_charge_start(p, key, 1000, "USD", source, on_done, &o);
    outcome_wait(&o, 1);
    assert_false(o.failure_seen);
    assert_false(pthread_equal(o.thread, pthread_self())); /* the client's own thread */
    proc_result r = o.last;
    outcome_destroy(&o);
    return r;
}

/* ---- the tests ---- */

static void started_and_blocking_charges_read_alike(void **state)
{
    fake_processor f;
    fake_start(&f);
    http_processor *p = http_processor_create(f.url, 5000);
    assert_non_null(p);
    const char *sources[] = {"tok_visa", "tok_chargeDeclined", "tok_garbage", "tok_fail"};
    const proc_status expected[] = {PROC_APPROVED, PROC_DECLINED, PROC_UNAVAILABLE,
                                    PROC_UNAVAILABLE};
    for (size_t i = 0; i < 4; i++) {
        proc_result blocking = http_processor_charge(p, "pk_blocking", 1000, "USD", sources[i]);
        pthread_mutex_lock(&f.lock);
        char blocking_key[300], blocking_type[128];
        strcpy(blocking_key, f.last_key);
        strcpy(blocking_type, f.last_type);
        pthread_mutex_unlock(&f.lock);
        proc_result started = started_charge(p, "pk_started", sources[i]);
        assert_int_equal(blocking.status, expected[i]);
        assert_int_equal(started.status, expected[i]);
        assert_string_equal(started.id, blocking.id);
        assert_string_equal(started.decline_code, blocking.decline_code);
        /* the same request: the processor key as Idempotency-Key, a JSON body */
        pthread_mutex_lock(&f.lock);
        assert_string_equal(blocking_key, "pk_blocking");
        assert_string_equal(f.last_key, "pk_started");
        assert_string_equal(f.last_type, blocking_type);
        assert_string_equal(f.last_type, "application/json");
        pthread_mutex_unlock(&f.lock);
    }
    assert_string_equal(started_charge(p, "pk", "tok_chargeDeclined").decline_code,
                        "generic_decline");
    http_processor_free(p);
    fake_stop(&f);
}

/* The fake answers none of these before all have arrived: one at a time, none would pass. */
static void started_charges_run_at_once(void **state)
{
    fake_processor f;
    fake_start(&f);
    http_processor *p = http_processor_create(f.url, 10000);
    assert_non_null(p);
    outcome o;
    outcome_init(&o);
    char keys[OVERLAP][32];
    for (int i = 0; i < OVERLAP; i++) {
        snprintf(keys[i], sizeof keys[i], "pk_overlap_%d", i);
        http_processor_charge_start(p, keys[i], 1000, "USD", "tok_overlap", on_done, &o);
    }
    outcome_wait(&o, OVERLAP);
    assert_int_equal(o.approved, OVERLAP);
    outcome_destroy(&o);
    http_processor_free(p);
    fake_stop(&f);
}

static void silent_processor_times_out(void **state)
{
    silent_processor s;
    silent_start(&s);
    http_processor *p = http_processor_create(s.url, 200);
    assert_non_null(p);
    assert_int_equal(started_charge(p, "pk_silent", "tok_visa").status, PROC_UNAVAILABLE);
    http_processor_free(p);
    silent_stop(&s);
}

static void free_ends_a_charge_in_flight_once(void **state)
{
    silent_processor s;
    silent_start(&s);
    http_processor *p = http_processor_create(s.url, 60000);
    assert_non_null(p);
    outcome o;
    outcome_init(&o);
    http_processor_charge_start(p, "pk_in_flight", 1000, "USD", "tok_visa", on_done, &o);
    silent_wait_requests(&s, 1); /* the request is out: the transfer is in flight */
    assert_int_equal(o.calls, 0);
    http_processor_free(p);
    /* ended before free returned, once, in doubt */
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.last.status, PROC_UNAVAILABLE);
    outcome_destroy(&o);
    silent_stop(&s);
}

static void unsafe_key_answers_at_once(void **state)
{
    http_processor *p = http_processor_create("http://127.0.0.1:1", 1000);
    assert_non_null(p);
    outcome o;
    outcome_init(&o);
    http_processor_charge_start(p, "bad\r\nkey", 1000, "USD", "tok_visa", on_done, &o);
    assert_int_equal(o.calls, 1); /* before the start returned, on this thread */
    assert_true(pthread_equal(o.thread, pthread_self()));
    assert_int_equal(o.last.status, PROC_UNAVAILABLE);
    outcome_destroy(&o);
    http_processor_free(p);
}

/* §17: an authorization reads as approved and authorized (an answer that is not a hold is in
 * doubt); a capture and a release send their amounts and key; 409 hold_exceeded, 404 and a 5xx
 * read as declined, not found and in doubt; an id that cannot go into a path is never sent. */
static void holds(void **state)
{
    fake_processor f;
    fake_start(&f);
    http_processor *p = http_processor_create(f.url, 5000);
    proc_result r = http_processor_authorize(p, "k-auth", 1000, "USD", "tok_hold");
    assert_int_equal(r.status, PROC_APPROVED);
    assert_true(r.authorized);
    assert_string_equal(r.id, "ch_hold");
    r = http_processor_authorize(p, "k-auth2", 1000, "USD", "tok_visa");
    assert_int_equal(r.status, PROC_UNAVAILABLE); /* a capture where a hold was asked */

    r = http_processor_capture(p, "k-cap", "ch_hold", 300, 700);
    assert_int_equal(r.status, PROC_APPROVED);
    assert_string_equal(r.id, "cp_1");
    assert_string_equal(f.last_url, "/charges/ch_hold/capture");
    assert_string_equal(f.last_key, "k-cap");
    json_t *body = json_loads(f.last_body, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(body, "amount")), 300);
    assert_true(json_is_true(json_object_get(body, "final")));
    assert_int_equal(json_integer_value(json_object_get(body, "release")), 700);
    json_decref(body);

    r = http_processor_release(p, "k-rel", "ch_hold", 700);
    assert_int_equal(r.status, PROC_APPROVED);
    assert_string_equal(f.last_url, "/charges/ch_hold/release");
    body = json_loads(f.last_body, 0, NULL);
    assert_int_equal(json_integer_value(json_object_get(body, "amount")), 700);
    json_decref(body);

    r = http_processor_capture(p, "k-full", "ch_full", 1, 0);
    assert_int_equal(r.status, PROC_DECLINED);
    assert_string_equal(r.decline_code, "hold_exceeded");
    assert_int_equal(http_processor_capture(p, "k-none", "ch_none", 1, 0).status, PROC_NOT_FOUND);
    assert_int_equal(http_processor_release(p, "k-down", "ch_down", 1).status, PROC_UNAVAILABLE);
    snprintf(f.last_url, sizeof f.last_url, "untouched");
    assert_int_equal(http_processor_capture(p, "k-bad", "ch/../x", 1, 0).status, PROC_UNAVAILABLE);
    assert_string_equal(f.last_url, "untouched");
    http_processor_free(p);
    fake_stop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(started_and_blocking_charges_read_alike),
        cmocka_unit_test(started_charges_run_at_once),
        cmocka_unit_test(silent_processor_times_out),
        cmocka_unit_test(free_ends_a_charge_in_flight_once),
        cmocka_unit_test(unsafe_key_answers_at_once),
        cmocka_unit_test(holds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

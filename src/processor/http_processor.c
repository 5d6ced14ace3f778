/* The §5 processor protocol over HTTP, for `--processor http://HOST:PORT`.
 *
 * Every answer we cannot read for certain (a timeout, a refused or dropped connection, a 5xx,
 * a body that is not the protocol's JSON) is PROC_UNAVAILABLE: the charge may or may not have
 * been made, and payd resolves that later by asking again with the same processor key.
 *
 * A call travels one of two ways, with one request (call_begin) and one reading of its answer
 * (call_end) for both: blocking, by curl_easy_perform on the caller's thread (refunds, lookups,
 * and charges where a thread may wait), or started (http_processor_charge_start), handed to the
 * processor's own thread, which carries every started charge at once on one libcurl multi
 * handle and calls back as each ends, so no thread waits for the processor's answer. */
#include "processor/http_processor.h"

#include <curl/curl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"

#define MAX_ANSWER_BYTES                                                                           \
    (64 * 1024) /* the protocol's answers are tiny; more is not the protocol                       \
                 */
/* Connections the multi handle keeps open to the processor between started charges: enough for
 * a burst of concurrent payments to reuse them rather than connect again. */
#define POOL_CONNECTIONS 64
#define IDLE_HANDLES     64   /* easy handles kept for the next started charges */
#define IDLE_POLL_MS     1000 /* the loop's longest sleep; a start or a stop wakes it at once */

typedef struct transfer transfer;

struct http_processor {
    char *base; /* without a trailing slash */
    long timeout_ms;
    /* Started charges. The loop thread alone drives the multi handle and the in-flight list;
     * the queue of charges not yet handed to it, the idle handles and `stopping` are shared
     * under the lock. */
    CURLM *multi;
    pthread_t loop;
    pthread_mutex_t lock;
    transfer *queue_head, *queue_tail;
    transfer *in_flight;
    CURL *idle[IDLE_HANDLES];
    int idle_count;
    bool stopping;
};

/* ---- one easy handle per thread ----
 * Calls come from many worker threads at once. A handle per thread needs no locking and keeps
 * its connection alive between calls; the key's destructor cleans it up when the thread ends. */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static pthread_key_t handle_key;
static bool curl_ready;

static void free_handle(void *h)
{
    curl_easy_cleanup(h);
}

static void init_curl(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK &&
                 pthread_key_create(&handle_key, free_handle) == 0;
}

static CURL *thread_handle(void)
{
    if (!curl_ready)
        return NULL;
    CURL *h = pthread_getspecific(handle_key);
    if (h) {
        /* drop the previous call's options; the connection cache survives a reset */
        curl_easy_reset(h);
        return h;
    }
    h = curl_easy_init();
    if (h && pthread_setspecific(handle_key, h) != 0) {
        curl_easy_cleanup(h);
        return NULL;
    }
    return h;
}

static void *multi_loop(void *arg);

http_processor *http_processor_create(const char *base_url, int64_t timeout_ms)
{
    pthread_once(&curl_once, init_curl);
    if (!curl_ready)
        return NULL;
    http_processor *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->base = strdup(base_url);
    p->multi = curl_multi_init();
    if (!p->base || !p->multi) {
        curl_multi_cleanup(p->multi);
        free(p->base);
        free(p);
        return NULL;
    }
    size_t n = strlen(p->base);
    while (n > 0 && p->base[n - 1] == '/')
        p->base[--n] = '\0';
    p->timeout_ms = timeout_ms <= 0 ? 1 : timeout_ms > LONG_MAX ? LONG_MAX : (long)timeout_ms;
    curl_multi_setopt(p->multi, CURLMOPT_MAXCONNECTS, (long)POOL_CONNECTIONS);
    pthread_mutex_init(&p->lock, NULL);
    if (pthread_create(&p->loop, NULL, multi_loop, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        curl_multi_cleanup(p->multi);
        free(p->base);
        free(p);
        return NULL;
    }
    return p;
}

/* Stops the loop thread: charges still in flight end PROC_UNAVAILABLE, each calling back once,
 * and a charge started from now on does so at once. */
void http_processor_free(http_processor *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_mutex_unlock(&p->lock);
    curl_multi_wakeup(p->multi);
    pthread_join(p->loop, NULL);
    curl_multi_cleanup(p->multi);
    for (int i = 0; i < p->idle_count; i++)
        curl_easy_cleanup(p->idle[i]);
    pthread_mutex_destroy(&p->lock);
    free(p->base);
    free(p);
}

/* ---- one exchange ---- */

typedef struct answer {
    char *data;
    size_t len;
} answer;

static size_t collect(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    answer *a = userdata;
    size_t n = size * nmemb;
    if (a->len + n > MAX_ANSWER_BYTES)
        return 0; /* makes curl fail the transfer */
    char *grown = realloc(a->data, a->len + n + 1);
    if (!grown)
        return 0;
    a->data = grown;
    memcpy(a->data + a->len, ptr, n);
    a->len += n;
    a->data[a->len] = '\0';
    return n;
}

/* The key goes into a header: anything but visible ASCII could split or forge headers. */
static bool header_safe(const char *key)
{
    if (!key || !*key || strlen(key) > 255)
        return false;
    for (const char *c = key; *c; c++)
        if (*c < 0x21 || *c > 0x7e)
            return false;
    return true;
}

/* One line per failed call, with the request id of the request that made it (log_begin: the
 * thread's, which the loop thread sets to the one that started the charge). */
static void log_processor_failure(const char *path, CURLcode rc, long status)
{
    jsonw w;
    log_begin(&w, "error",
              rc == CURLE_OPERATION_TIMEDOUT ? "processor call timed out"
                                             : "processor call failed");
    jw_key(&w, "call");
    jw_string(&w, path);
    jw_key(&w, "error");
    jw_string(&w, rc != CURLE_OK ? curl_easy_strerror(rc) : "server error");
    jw_key(&w, "http_status");
    if (rc == CURLE_OK)
        jw_int(&w, status);
    else
        jw_null(&w);
    log_end(&w);
}

/* One request to the processor, whichever way it travels. */
typedef struct call {
    CURL *easy;
    char *url, *payload;
    struct curl_slist *headers;
    answer ans;
    char path[64]; /* without the query, for the log */
} call;

static void call_free(call *c)
{
    curl_slist_free_all(c->headers);
    free(c->ans.data);
    free(c->payload);
    free(c->url);
    c->headers = NULL;
    c->ans = (answer){0};
    c->payload = c->url = NULL;
}

/* Builds the request on easy: body NULL means GET. False when out of memory. */
static bool call_begin(http_processor *p, call *c, CURL *easy, const char *path_and_query,
                       const char *idem_key, json_t *body)
{
    *c = (call){.easy = easy};
    snprintf(c->path, sizeof c->path, "%.*s", (int)strcspn(path_and_query, "?"), path_and_query);
    size_t url_len = strlen(p->base) + strlen(path_and_query) + 1;
    c->url = malloc(url_len);
    c->payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (!c->url || (body && !c->payload)) {
        call_free(c);
        return false;
    }
    snprintf(c->url, url_len, "%s%s", p->base, path_and_query);

    c->headers = curl_slist_append(NULL, "Accept: application/json");
    /* no 100-continue round trip: the bodies are small */
    c->headers = curl_slist_append(c->headers, "Expect:");
    if (idem_key) {
        char idem_header[300];
        snprintf(idem_header, sizeof idem_header, "Idempotency-Key: %s", idem_key);
        c->headers = curl_slist_append(c->headers, idem_header);
    }
    if (c->payload)
        c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
    if (!c->headers) {
        call_free(c);
        return false;
    }

    curl_easy_setopt(easy, CURLOPT_URL, c->url);
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L); /* curl's timeouts must not use signals */
    curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, p->timeout_ms);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, c->headers);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(easy, CURLOPT_WRITEDATA, &c->ans);
    curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
    if (c->payload) {
        curl_easy_setopt(easy, CURLOPT_POSTFIELDS, c->payload);
        curl_easy_setopt(easy, CURLOPT_POSTFIELDSIZE, (long)strlen(c->payload));
    }
    return true;
}

/* Reads what the transfer that ended with rc brought back: the HTTP status and the parsed JSON
 * answer (NULL when it is not JSON), or -1 when no complete answer arrived. Frees what
 * call_begin took; the handle stays the caller's. */
static long call_end(call *c, CURLcode rc, json_t **out)
{
    *out = NULL;
    long status = -1;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
        if (c->ans.data)
            *out = json_loadb(c->ans.data, c->ans.len, 0, NULL);
    }
    if (rc != CURLE_OK || status >= 500)
        log_processor_failure(c->path, rc, status);
    call_free(c);
    return status;
}

/* A blocking call on this thread's handle. */
static long exchange(http_processor *p, const char *path_and_query, const char *idem_key,
                     json_t *body, json_t **out)
{
    *out = NULL;
    CURL *h = thread_handle();
    call c;
    if (!h || !call_begin(p, &c, h, path_and_query, idem_key, body))
        return -1;
    return call_end(&c, curl_easy_perform(h), out);
}

static bool copy_string(char *dst, size_t cap, const char *src)
{
    if (!src || strlen(src) >= cap)
        return false;
    memcpy(dst, src, strlen(src) + 1);
    return true;
}

/* {"id", "status": "succeeded" | "declined", "decline_code"?}; anything else is unreadable. */
static proc_result read_charge(json_t *j)
{
    proc_result r = {.status = PROC_UNAVAILABLE};
    const char *id = json_string_value(json_object_get(j, "id"));
    const char *status = json_string_value(json_object_get(j, "status"));
    const char *code = json_string_value(json_object_get(j, "decline_code"));
    if (!status || !copy_string(r.id, sizeof r.id, id) || !*r.id)
        return (proc_result){.status = PROC_UNAVAILABLE};
    if (!strcmp(status, "succeeded") || !strcmp(status, "authorized")) {
        r.status = PROC_APPROVED;
        r.authorized = !strcmp(status, "authorized");
    } else if (!strcmp(status, "declined")) {
        r.status = PROC_DECLINED;
        if (code && !copy_string(r.decline_code, sizeof r.decline_code, code))
            return (proc_result){.status = PROC_UNAVAILABLE};
    } else {
        return (proc_result){.status = PROC_UNAVAILABLE};
    }
    return r;
}

static json_t *charge_body(int64_t amount, const char *currency, const char *source)
{
    return json_pack("{s:I, s:s, s:s}", "amount", (json_int_t)amount, "currency", currency,
                     "source", source);
}

/* What a charge's exchange brought back (consumes ans). */
static proc_result charge_answer(long status, json_t *ans)
{
    proc_result r = {.status = PROC_UNAVAILABLE};
    if (status == 200 && ans)
        r = read_charge(ans);
    json_decref(ans);
    return r;
}

proc_result http_processor_charge(http_processor *p, const char *key, int64_t amount,
                                  const char *currency, const char *source)
{
    if (!p || !header_safe(key))
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_t *body = charge_body(amount, currency, source);
    if (!body)
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_t *ans;
    long status = exchange(p, "/charges", key, body, &ans);
    json_decref(body);
    return charge_answer(status, ans);
}

proc_result http_processor_find_charge(http_processor *p, const char *key)
{
    if (!p || !key || !*key)
        return (proc_result){.status = PROC_UNAVAILABLE};
    char *escaped = curl_easy_escape(NULL, key, 0);
    if (!escaped)
        return (proc_result){.status = PROC_UNAVAILABLE};
    size_t n = strlen("/charges?idempotency_key=") + strlen(escaped) + 1;
    char *path = malloc(n);
    if (!path) {
        curl_free(escaped);
        return (proc_result){.status = PROC_UNAVAILABLE};
    }
    snprintf(path, n, "/charges?idempotency_key=%s", escaped);
    curl_free(escaped);
    json_t *ans;
    long status = exchange(p, path, NULL, NULL, &ans);
    free(path);
    if (status == 404) {
        json_decref(ans);
        return (proc_result){.status = PROC_NOT_FOUND};
    }
    return charge_answer(status, ans);
}

static json_t *refund_body(const char *charge_id, int64_t amount)
{
    return json_pack("{s:s, s:I}", "charge_id", charge_id, "amount", (json_int_t)amount);
}

/* What a refund's exchange brought back (consumes ans): the protocol answers success or nothing
 * certain. */
static proc_result refund_answer(long status, json_t *ans)
{
    proc_result r = {.status = PROC_UNAVAILABLE};
    const char *id = json_string_value(json_object_get(ans, "id"));
    const char *st = json_string_value(json_object_get(ans, "status"));
    if (status == 200 && st && !strcmp(st, "succeeded") && copy_string(r.id, sizeof r.id, id) &&
        *r.id)
        r.status = PROC_APPROVED;
    json_decref(ans);
    return r;
}

proc_result http_processor_refund(http_processor *p, const char *key, const char *charge_id,
                                  int64_t amount)
{
    if (!p || !header_safe(key))
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_t *body = refund_body(charge_id, amount);
    if (!body)
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_t *ans;
    long status = exchange(p, "/refunds", key, body, &ans);
    json_decref(body);
    return refund_answer(status, ans);
}

/* ---- holds (docs/api.md §17) ---- */

proc_result http_processor_authorize(http_processor *p, const char *key, int64_t amount,
                                     const char *currency, const char *source)
{
    if (!p || !header_safe(key))
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_t *body = charge_body(amount, currency, source);
    if (!body)
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_object_set_new(body, "capture", json_false());
    json_t *ans;
    long status = exchange(p, "/charges", key, body, &ans);
    json_decref(body);
    proc_result r = charge_answer(status, ans);
    if (r.status == PROC_APPROVED && !r.authorized) /* not the protocol's answer to a hold */
        return (proc_result){.status = PROC_UNAVAILABLE};
    return r;
}

/* A charge id goes into the path: only the characters a processor's ids are made of. */
static bool id_safe(const char *id)
{
    if (!id || !*id || strlen(id) > 64)
        return false;
    for (const char *c = id; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '_' || *c == '-'))
            return false;
    return true;
}

/* A capture's or release's answer: 200 {"id", "status": "succeeded"}, 409 hold_exceeded, 404 no
 * such hold; anything else is in doubt. */
static proc_result hold_answer(long status, json_t *ans)
{
    proc_result r = {.status = PROC_UNAVAILABLE};
    const char *error = json_string_value(json_object_get(ans, "error"));
    if (status == 409 && error && !strcmp(error, "hold_exceeded")) {
        r.status = PROC_DECLINED;
        snprintf(r.decline_code, sizeof r.decline_code, "hold_exceeded");
    } else if (status == 404 && error && !strcmp(error, "not_found")) {
        r.status = PROC_NOT_FOUND;
    } else {
        json_incref(ans);
        r = refund_answer(status, ans); /* the same shape as a refund's */
    }
    json_decref(ans);
    return r;
}

static proc_result hold_call(http_processor *p, const char *key, const char *charge_id,
                             const char *op, json_t *body)
{
    if (!p || !header_safe(key) || !id_safe(charge_id) || !body) {
        json_decref(body);
        return (proc_result){.status = PROC_UNAVAILABLE};
    }
    char path[128];
    snprintf(path, sizeof path, "/charges/%s/%s", charge_id, op);
    json_t *ans;
    long status = exchange(p, path, key, body, &ans);
    json_decref(body);
    return hold_answer(status, ans);
}

proc_result http_processor_capture(http_processor *p, const char *key, const char *charge_id,
                                   int64_t amount, int64_t release)
{
    return hold_call(p, key, charge_id, "capture",
                     json_pack("{s:I, s:b, s:I}", "amount", (json_int_t)amount, "final",
                               release > 0, "release", (json_int_t)release));
}

proc_result http_processor_release(http_processor *p, const char *key, const char *charge_id,
                                   int64_t amount)
{
    return hold_call(p, key, charge_id, "release",
                     json_pack("{s:I}", "amount", (json_int_t)amount));
}

proc_hold http_processor_hold(http_processor *p, const char *charge_id)
{
    if (!p || !id_safe(charge_id))
        return (proc_hold){.status = PROC_UNAVAILABLE};
    char path[96];
    snprintf(path, sizeof path, "/charges/%s", charge_id);
    json_t *ans;
    long status = exchange(p, path, NULL, NULL, &ans);
    proc_hold h = {.status = status == 404 ? PROC_NOT_FOUND : PROC_UNAVAILABLE};
    json_t *amount = json_object_get(ans, "amount");
    if (status == 200 && json_is_integer(amount)) {
        const char *st = json_string_value(json_object_get(ans, "status"));
        h = (proc_hold){.status = PROC_APPROVED,
                        .amount = json_integer_value(amount),
                        .captured = json_integer_value(json_object_get(ans, "captured")),
                        .released = json_integer_value(json_object_get(ans, "released")),
                        .authorized = st && !strcmp(st, "authorized")};
    }
    json_decref(ans);
    return h;
}

/* ---- started calls: one thread, one multi handle, every transfer in flight at once ---- */

struct transfer {
    call call;
    proc_result (*read_answer)(long status, json_t *ans); /* charge_answer, refund_answer */
    processor_charge_done done;
    void *arg;
    char *request_id;      /* of the request that started it: its failure lines name it */
    transfer *prev, *next; /* in the queue (next only), then in flight */
};

static CURL *take_handle(http_processor *p)
{
    CURL *h = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->idle_count > 0)
        h = p->idle[--p->idle_count];
    pthread_mutex_unlock(&p->lock);
    if (!h)
        return curl_easy_init();
    curl_easy_reset(h); /* drop the previous charge's options */
    return h;
}

static void give_back_handle(http_processor *p, CURL *h)
{
    pthread_mutex_lock(&p->lock);
    if (p->idle_count < IDLE_HANDLES) {
        p->idle[p->idle_count++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&p->lock);
    if (h)
        curl_easy_cleanup(h);
}

/* Reads the ended transfer's answer and calls back, on whichever thread ends it: the loop's, or
 * the starter's when the processor is stopping. */
static void end_transfer(http_processor *p, transfer *t, CURLcode rc)
{
    const char *threads_own = log_request_id();
    log_set_request_id(t->request_id);
    json_t *ans;
    long status = call_end(&t->call, rc, &ans);
    proc_result r = t->read_answer(status, ans);
    log_set_request_id(threads_own);
    give_back_handle(p, t->call.easy);
    processor_charge_done done = t->done;
    void *arg = t->arg;
    free(t->request_id);
    free(t);
    done(r, DB_FAILURE_NONE, arg);
}

/* Starts a call (the body is consumed): queued for the loop thread, or ended at once. */
static void start_call(http_processor *p, const char *path, const char *key, json_t *body,
                       proc_result (*read_answer)(long, json_t *), processor_charge_done done,
                       void *arg)
{
    transfer *t = body && p && header_safe(key) ? calloc(1, sizeof *t) : NULL;
    CURL *easy = t ? take_handle(p) : NULL;
    bool built = easy && call_begin(p, &t->call, easy, path, key, body);
    json_decref(body);
    if (!built) {
        if (easy)
            give_back_handle(p, easy);
        free(t);
        done((proc_result){.status = PROC_UNAVAILABLE}, DB_FAILURE_NONE, arg);
        return;
    }
    t->read_answer = read_answer;
    t->done = done;
    t->arg = arg;
    const char *request_id = log_request_id();
    t->request_id = request_id ? strdup(request_id) : NULL;
    curl_easy_setopt(easy, CURLOPT_PRIVATE, (void *)t);

    pthread_mutex_lock(&p->lock);
    bool accepted = !p->stopping;
    if (accepted) {
        if (p->queue_tail)
            p->queue_tail->next = t;
        else
            p->queue_head = t;
        p->queue_tail = t;
    }
    pthread_mutex_unlock(&p->lock);
    if (!accepted)
        end_transfer(p, t, CURLE_ABORTED_BY_CALLBACK);
    else
        curl_multi_wakeup(p->multi); /* the loop may be asleep in curl_multi_poll */
}

void http_processor_charge_start(http_processor *p, const char *key, int64_t amount,
                                 const char *currency, const char *source,
                                 processor_charge_done done, void *arg)
{
    start_call(p, "/charges", key, charge_body(amount, currency, source), charge_answer, done, arg);
}

void http_processor_refund_start(http_processor *p, const char *key, const char *charge_id,
                                 int64_t amount, processor_charge_done done, void *arg)
{
    start_call(p, "/refunds", key, refund_body(charge_id, amount), refund_answer, done, arg);
}

static void unlink_in_flight(http_processor *p, transfer *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        p->in_flight = t->next;
    if (t->next)
        t->next->prev = t->prev;
}

/* Hands a queued charge to the multi handle (loop thread). */
static void begin_transfer(http_processor *p, transfer *t)
{
    if (curl_multi_add_handle(p->multi, t->call.easy) != CURLM_OK) {
        end_transfer(p, t, CURLE_FAILED_INIT);
        return;
    }
    t->prev = NULL;
    t->next = p->in_flight;
    if (p->in_flight)
        p->in_flight->prev = t;
    p->in_flight = t;
}

/* Ends every transfer the multi handle reports done (loop thread). */
static void end_finished_transfers(http_processor *p)
{
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(p->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *easy = msg->easy_handle;
        CURLcode rc = msg->data.result; /* msg is gone once the handle is removed */
        char *owner = NULL;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, &owner);
        transfer *t = (transfer *)(void *)owner;
        curl_multi_remove_handle(p->multi, easy);
        unlink_in_flight(p, t);
        end_transfer(p, t, rc);
    }
}

static void *multi_loop(void *arg)
{
    http_processor *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->lock);
        transfer *queued = p->queue_head;
        p->queue_head = p->queue_tail = NULL;
        bool stopping = p->stopping;
        pthread_mutex_unlock(&p->lock);
        for (transfer *t = queued, *next; t; t = next) {
            next = t->next;
            begin_transfer(p, t);
        }
        if (stopping)
            break;
        int running;
        curl_multi_perform(p->multi, &running);
        end_finished_transfers(p); /* their callbacks may start charges: queued for the next turn */
        curl_multi_poll(p->multi, NULL, 0, IDLE_POLL_MS, NULL);
    }
    /* stopping: whatever is in flight ends unanswered, in doubt like any lost answer */
    while (p->in_flight) {
        transfer *t = p->in_flight;
        unlink_in_flight(p, t);
        curl_multi_remove_handle(p->multi, t->call.easy);
        end_transfer(p, t, CURLE_ABORTED_BY_CALLBACK);
    }
    return NULL;
}

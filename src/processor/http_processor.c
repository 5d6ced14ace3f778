/* The §5 processor protocol over HTTP, for `--processor http://HOST:PORT`.
 *
 * Every answer we cannot read for certain (a timeout, a refused or dropped connection, a 5xx,
 * a body that is not the protocol's JSON) is PROC_UNAVAILABLE: the charge may or may not have
 * been made, and payd resolves that later by asking again with the same processor key. */
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

struct http_processor {
    char *base; /* without a trailing slash */
    long timeout_ms;
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

http_processor *http_processor_create(const char *base_url, int64_t timeout_ms)
{
    pthread_once(&curl_once, init_curl);
    http_processor *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->base = strdup(base_url);
    if (!p->base) {
        free(p);
        return NULL;
    }
    size_t n = strlen(p->base);
    while (n > 0 && p->base[n - 1] == '/')
        p->base[--n] = '\0';
    p->timeout_ms = timeout_ms <= 0 ? 1 : timeout_ms > LONG_MAX ? LONG_MAX : (long)timeout_ms;
    return p;
}

void http_processor_free(http_processor *p)
{
    if (!p)
        return;
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

/* One line per failed call, with the request id of the request that made it. */
static void log_processor_failure(const char *path_and_query, CURLcode rc, long status)
{
    jsonw w;
    log_begin(&w, "error",
              rc == CURLE_OPERATION_TIMEDOUT ? "processor call timed out"
                                             : "processor call failed");
    jw_key(&w, "call");
    char path[64];
    snprintf(path, sizeof path, "%.*s", (int)strcspn(path_and_query, "?"), path_and_query);
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

/* Sends one request; body NULL means GET. Returns the HTTP status and the parsed JSON answer
 * (NULL when it is not JSON), or -1 when no complete answer arrived. */
static long exchange(http_processor *p, const char *path_and_query, const char *idem_key,
                     json_t *body, json_t **out)
{
    *out = NULL;
    CURL *h = thread_handle();
    if (!h)
        return -1;
    size_t url_len = strlen(p->base) + strlen(path_and_query) + 1;
    char *url = malloc(url_len);
    char *payload = body ? json_dumps(body, JSON_COMPACT) : NULL;
    if (!url || (body && !payload)) {
        free(url);
        free(payload);
        return -1;
    }
    snprintf(url, url_len, "%s%s", p->base, path_and_query);

    struct curl_slist *headers = curl_slist_append(NULL, "Accept: application/json");
    /* no 100-continue round trip: the bodies are small */
    headers = curl_slist_append(headers, "Expect:");
    char idem_header[300];
    if (idem_key) {
        snprintf(idem_header, sizeof idem_header, "Idempotency-Key: %s", idem_key);
        headers = curl_slist_append(headers, idem_header);
    }
    if (payload)
        headers = curl_slist_append(headers, "Content-Type: application/json");

    answer a = {0};
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* curl's timeouts must not use signals in threads */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, p->timeout_ms);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    if (payload) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
    }

    long status = -1;
    CURLcode rc = headers ? curl_easy_perform(h) : CURLE_OUT_OF_MEMORY;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (a.data)
            *out = json_loadb(a.data, a.len, 0, NULL);
    }
    if (rc != CURLE_OK || status >= 500)
        log_processor_failure(path_and_query, rc, status);
    curl_slist_free_all(headers);
    free(a.data);
    free(payload);
    free(url);
    return status;
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
    if (!strcmp(status, "succeeded")) {
        r.status = PROC_APPROVED;
    } else if (!strcmp(status, "declined")) {
        r.status = PROC_DECLINED;
        if (code && !copy_string(r.decline_code, sizeof r.decline_code, code))
            return (proc_result){.status = PROC_UNAVAILABLE};
    } else {
        return (proc_result){.status = PROC_UNAVAILABLE};
    }
    return r;
}

proc_result http_processor_charge(http_processor *p, const char *key, int64_t amount,
                                  const char *currency, const char *source)
{
    if (!p || !header_safe(key))
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_t *body = json_pack("{s:I, s:s, s:s}", "amount", (json_int_t)amount, "currency", currency,
                             "source", source);
    if (!body)
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_t *ans;
    long status = exchange(p, "/charges", key, body, &ans);
    json_decref(body);
    proc_result r = {.status = PROC_UNAVAILABLE};
    if (status == 200 && ans)
        r = read_charge(ans);
    json_decref(ans);
    return r;
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
    proc_result r = {.status = PROC_UNAVAILABLE};
    if (status == 200 && ans)
        r = read_charge(ans);
    else if (status == 404)
        r.status = PROC_NOT_FOUND;
    json_decref(ans);
    return r;
}

proc_result http_processor_refund(http_processor *p, const char *key, const char *charge_id,
                                  int64_t amount)
{
    if (!p || !header_safe(key))
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_t *body = json_pack("{s:s, s:I}", "charge_id", charge_id, "amount", (json_int_t)amount);
    if (!body)
        return (proc_result){.status = PROC_UNAVAILABLE};
    json_t *ans;
    long status = exchange(p, "/refunds", key, body, &ans);
    json_decref(body);
    proc_result r = {.status = PROC_UNAVAILABLE};
    const char *id = json_string_value(json_object_get(ans, "id"));
    const char *st = json_string_value(json_object_get(ans, "status"));
    if (status == 200 && st && !strcmp(st, "succeeded") && copy_string(r.id, sizeof r.id, id) &&
        *r.id)
        r.status = PROC_APPROVED;
    json_decref(ans);
    return r;
}

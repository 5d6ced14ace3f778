/* One HTTP exchange with libcurl: send the request, collect the status, the headers the client
 * cares about and the body. No retries and no policy here: retry.c decides what to do next. */
#include "client/internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct body_buffer {
    char *data;
    size_t len;
    size_t cap;
    bool out_of_memory;
} body_buffer;

static size_t on_body(char *chunk, size_t size, size_t count, void *userdata)
{
    body_buffer *buf = userdata;
    size_t n = size * count;
    if (buf->len + n + 1 > buf->cap) {
        size_t cap = buf->cap ? buf->cap : 4096;
        while (cap < buf->len + n + 1)
            cap *= 2;
        char *grown = realloc(buf->data, cap);
        if (!grown) {
            buf->out_of_memory = true;
            return 0; /* makes curl stop with CURLE_WRITE_ERROR */
        }
        buf->data = grown;
        buf->cap = cap;
    }
    memcpy(buf->data + buf->len, chunk, n);
    buf->len += n;
    buf->data[buf->len] = '\0';
    return n;
}

/* If `line` is the header `name`, copy its trimmed value into dst and return true. */
static bool take_header(const char *line, size_t len, const char *name, char *dst, size_t size)
{
    size_t name_len = strlen(name);
    if (len <= name_len || line[name_len] != ':' || strncasecmp(line, name, name_len) != 0)
        return false;
    const char *value = line + name_len + 1;
    const char *end = line + len;
    while (value < end && (*value == ' ' || *value == '\t'))
        value++;
    while (end > value && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    size_t n = (size_t)(end - value);
    if (n >= size)
        n = size - 1;
    memcpy(dst, value, n);
    dst[n] = '\0';
    return true;
}

static size_t on_header(char *line, size_t size, size_t count, void *userdata)
{
    http_attempt *out = userdata;
    size_t len = size * count;
    /* A new status line starts a new header block (e.g. after "100 Continue"): forget the old. */
    if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        out->retry_after[0] = out->request_id[0] = out->etag[0] = out->location[0] = '\0';
        out->replayed = false;
        return len;
    }
    char replayed[16];
    if (take_header(line, len, "Idempotent-Replayed", replayed, sizeof replayed))
        out->replayed = strcasecmp(replayed, "true") == 0;
    take_header(line, len, "Retry-After", out->retry_after, sizeof out->retry_after);
    take_header(line, len, "X-Request-Id", out->request_id, sizeof out->request_id);
    take_header(line, len, "ETag", out->etag, sizeof out->etag);
    take_header(line, len, "Location", out->location, sizeof out->location);
    return len;
}

static struct curl_slist *build_headers(payd_client *client, const http_exchange *ex, bool *ok)
{
    char line[512];
    struct curl_slist *list = NULL, *next;
    *ok = true;
#define ADD(text)                                                                                  \
    do {                                                                                           \
        next = curl_slist_append(list, (text));                                                    \
        if (!next) {                                                                               \
            *ok = false;                                                                           \
            return list;                                                                           \
        }                                                                                          \
        list = next;                                                                               \
    } while (0)
    ADD(client->authorization);
    ADD("Accept: application/json");
    ADD("Expect:"); /* no 100-continue round trip for larger bodies */
    if (ex->body)
        ADD("Content-Type: application/json");
    if (ex->idempotency_key) {
        snprintf(line, sizeof line, "Idempotency-Key: %s", ex->idempotency_key);
        ADD(line);
    }
    if (ex->if_match) {
        snprintf(line, sizeof line, "If-Match: %s", ex->if_match);
        ADD(line);
    }
#undef ADD
    return list;
}

int http_perform(payd_client *client, const http_exchange *ex, http_attempt *out)
{
    memset(out, 0, sizeof *out);
    bool headers_ok;
    struct curl_slist *headers = build_headers(client, ex, &headers_ok);
    if (!headers_ok) {
        curl_slist_free_all(headers);
        return -1;
    }

    /* Reset forgets the previous call's options but keeps the connection for keep-alive. */
    CURL *curl = client->curl;
    curl_easy_reset(curl);
    body_buffer body = {0};
    curl_easy_setopt(curl, CURLOPT_URL, ex->url);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L); /* no SIGALRM: safe with threads */
    curl_easy_setopt(curl, CURLOPT_USERAGENT, PAYD_USER_AGENT);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)ex->timeout_ms);
    int64_t connect_ms = client->policy.connect_timeout_ms;
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(connect_ms < ex->timeout_ms ? connect_ms : ex->timeout_ms));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, out->transport_error);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    if (strcmp(ex->method, "GET") == 0) {
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    } else {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, ex->method);
        const char *payload = ex->body ? ex->body : "";
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, payload);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
    }

    out->transport = curl_easy_perform(curl);
    curl_slist_free_all(headers);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL); /* out may move; do not keep a pointer */
    if (body.out_of_memory) {
        free(body.data);
        return -1;
    }
    if (out->transport == CURLE_OK) {
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->http_status);
    } else {
        out->http_status = 0;
        if (!out->transport_error[0])
            copy_string(out->transport_error, sizeof out->transport_error,
                        curl_easy_strerror(out->transport));
    }
    out->body = body.data;
    out->body_len = body.len;
    return 0;
}

void http_attempt_clear(http_attempt *attempt)
{
    free(attempt->body);
    attempt->body = NULL;
    attempt->body_len = 0;
}

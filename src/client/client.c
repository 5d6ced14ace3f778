/* The handle, its settings, results and the small helpers every other part uses. */
#include "client/internal.h"

#include <errno.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backoff.h"

/* The largest delay a policy may name: a day. Keeps every sum of times far from overflow. */
#define POLICY_MAX_MS (24LL * 3600 * 1000)

static pthread_once_t curl_init_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

/* curl_global_init is not thread-safe in every libcurl, so it runs exactly once. */
static void init_curl(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void payd_retry_policy_default(payd_retry_policy *policy)
{
    *policy = (payd_retry_policy){
        .max_retries = 4,
        .base_delay_ms = BACKOFF_DEFAULT_BASE_MS,
        .max_delay_ms = BACKOFF_DEFAULT_MAX_DELAY_MS,
        .deadline_ms = 120000,
        .attempt_timeout_ms = 30000,
        .connect_timeout_ms = 5000,
    };
}

payd_client *payd_client_new(const char *base_url, const char *api_key)
{
    if (!base_url || !*base_url || !api_key)
        return NULL;
    pthread_once(&curl_init_once, init_curl);
    if (curl_init_result != CURLE_OK)
        return NULL;

    payd_client *client = calloc(1, sizeof *client);
    if (!client)
        return NULL;
    size_t url_len = strlen(base_url);
    while (url_len > 0 && base_url[url_len - 1] == '/')
        url_len--;
    client->base_url = strndup(base_url, url_len);
    if (asprintf(&client->authorization, "Authorization: Bearer %s", api_key) < 0)
        client->authorization = NULL;
    client->curl = curl_easy_init();
    if (!client->base_url || !client->authorization || !client->curl) {
        payd_client_free(client);
        return NULL;
    }
    payd_retry_policy_default(&client->policy);
    return client;
}

void payd_client_free(payd_client *client)
{
    if (!client)
        return;
    if (client->curl)
        curl_easy_cleanup(client->curl);
    if (client->authorization) /* holds the API key: wipe it before handing the memory back */
        memset(client->authorization, 0, strlen(client->authorization));
    free(client->authorization);
    free(client->base_url);
    free(client);
}

payd_status payd_client_set_retry_policy(payd_client *client, const payd_retry_policy *policy)
{
    const payd_retry_policy *p = policy;
    if (p->max_retries < 0 || p->max_retries > 1000 || p->base_delay_ms < 0 ||
        p->max_delay_ms < p->base_delay_ms || p->max_delay_ms > POLICY_MAX_MS ||
        p->deadline_ms < 0 || p->deadline_ms > POLICY_MAX_MS || p->attempt_timeout_ms <= 0 ||
        p->attempt_timeout_ms > POLICY_MAX_MS || p->connect_timeout_ms <= 0 ||
        p->connect_timeout_ms > POLICY_MAX_MS)
        return PAYD_ERR_USAGE;
    client->policy = *policy;
    return PAYD_OK;
}

void payd_client_get_retry_policy(const payd_client *client, payd_retry_policy *policy)
{
    *policy = client->policy;
}

void payd_client_set_time_hooks(payd_client *client, const payd_time_hooks *hooks)
{
    client->time = hooks ? *hooks : (payd_time_hooks){0};
}

void payd_client_set_observer(payd_client *client, payd_observer_fn fn, void *ctx)
{
    client->observer = fn;
    client->observer_ctx = ctx;
}

static int64_t clock_ms(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t client_monotonic_ms(payd_client *client)
{
    if (client->time.monotonic_ms)
        return client->time.monotonic_ms(client->time.ctx);
    return clock_ms(CLOCK_MONOTONIC);
}

int64_t client_wall_clock_ms(payd_client *client)
{
    if (client->time.wall_clock_ms)
        return client->time.wall_clock_ms(client->time.ctx);
    return clock_ms(CLOCK_REALTIME);
}

void client_sleep_ms(payd_client *client, int64_t ms)
{
    if (client->time.sleep_ms) {
        client->time.sleep_ms(client->time.ctx, ms);
        return;
    }
    struct timespec left = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

double client_random_unit(void)
{
    uint64_t bits = 0;
    if (RAND_bytes((unsigned char *)&bits, sizeof bits) != 1) {
        /* Jitter only spreads clients out; a weaker source still does that. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        bits = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ULL;
    }
    return backoff_unit_from_bits(bits);
}

void copy_string(char *dst, size_t size, const char *src)
{
    if (size == 0)
        return;
    snprintf(dst, size, "%s", src ? src : "");
}

void payd_result_clear(payd_result *result)
{
    if (!result)
        return;
    free(result->body);
    memset(result, 0, sizeof *result);
}

const char *payd_status_name(payd_status status)
{
    switch (status) {
    case PAYD_OK:
        return "ok";
    case PAYD_ERR_HTTP:
        return "http_error";
    case PAYD_ERR_NETWORK:
        return "network_error";
    case PAYD_ERR_DEADLINE:
        return "deadline_exceeded";
    case PAYD_ERR_USAGE:
        return "usage_error";
    case PAYD_ERR_PROTOCOL:
        return "protocol_error";
    case PAYD_ERR_NOMEM:
        return "out_of_memory";
    }
    return "unknown";
}

const char *payd_give_up_name(payd_give_up reason)
{
    switch (reason) {
    case PAYD_GIVE_UP_NONE:
        return "none";
    case PAYD_GIVE_UP_MAX_RETRIES:
        return "max_retries";
    case PAYD_GIVE_UP_DEADLINE:
        return "deadline";
    case PAYD_GIVE_UP_RETRY_AFTER:
        return "retry_after_exceeds_max_delay";
    }
    return "unknown";
}

int payd_uuid4(char out[37])
{
    unsigned char b[16];
    if (RAND_bytes(b, sizeof b) != 1) {
        out[0] = '\0';
        return -1;
    }
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return 0;
}

char *payd_escape(const char *text)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t len = strlen(text);
    char *out = malloc(len * 3 + 1);
    if (!out)
        return NULL;
    char *w = out;
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        bool unreserved = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                          (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' ||
                          *p == '~';
        if (unreserved) {
            *w++ = (char)*p;
        } else {
            *w++ = '%';
            *w++ = hex[*p >> 4];
            *w++ = hex[*p & 15];
        }
    }
    *w = '\0';
    return out;
}

void payd_free(void *memory)
{
    free(memory);
}

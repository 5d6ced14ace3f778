/* What the parts of libpaydclient share and nobody outside sees. */
#ifndef PAYD_CLIENT_INTERNAL_H
#define PAYD_CLIENT_INTERNAL_H

#include "payd/client.h"

#include <curl/curl.h>

#define PAYD_USER_AGENT "payd-client/" PAYD_CLIENT_VERSION

struct payd_client {
    char *base_url;      /* without a trailing '/' */
    char *authorization; /* "Authorization: Bearer <key>" */
    CURL *curl;          /* reused across calls, so attempts share a keep-alive connection */
    payd_retry_policy policy;
    payd_time_hooks time;
    payd_observer_fn observer;
    void *observer_ctx;
};

/* ---- transport.c: exactly one HTTP exchange, no retries ---- */

typedef struct http_attempt {
    CURLcode transport; /* CURLE_OK when an answer arrived */
    char transport_error[CURL_ERROR_SIZE];
    long http_status;
    char retry_after[128]; /* raw header value, "" if none */
    char request_id[129];
    char etag[64];
    char location[256];
    bool replayed;
    char *body; /* malloc'd, NUL-terminated */
    size_t body_len;
} http_attempt;

typedef struct http_exchange {
    const char *method;
    const char *url;
    const char *body;            /* NULL: none */
    const char *idempotency_key; /* NULL: header not sent */
    const char *if_match;
    int64_t timeout_ms;
} http_exchange;

/* Fills *out (which it owns until http_attempt_clear). -1 only when out of memory. */
int http_perform(payd_client *client, const http_exchange *exchange, http_attempt *out);
void http_attempt_clear(http_attempt *attempt);

/* ---- client.c ---- */

int64_t client_monotonic_ms(payd_client *client);
int64_t client_wall_clock_ms(payd_client *client);
void client_sleep_ms(payd_client *client, int64_t ms);
/* A uniform double in [0, 1) from the system's cryptographic random source. */
double client_random_unit(void);
/* Copies at most size-1 bytes and always terminates. */
void copy_string(char *dst, size_t size, const char *src);

#endif

/* libpaydclient: a C client for the payd payments API (docs/api.md), with the retry policy of §14.
 *
 * One logical call (create a payment, fetch a page, ...) may take several HTTP attempts:
 * connection failures, timeouts, 5xx, 429 and 409 request_in_progress are retried with
 * exponential backoff and jitter, never sooner than the server's Retry-After, and every attempt
 * of a POST carries the same Idempotency-Key, so a retried payment is charged at most once.
 *
 * Threads: a handle is used by one thread at a time; use one handle per thread. Handles share
 * nothing, so any number of threads may each use their own.
 *
 * Memory: every payd_result is zero-initialised by the caller (payd_result r = {0};), filled by a
 * call (which first clears what it held) and released with payd_result_clear(). */
#ifndef PAYD_CLIENT_H
#define PAYD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define PAYD_API __attribute__((visibility("default")))
#else
#define PAYD_API
#endif

#define PAYD_CLIENT_VERSION "0.1.0"

typedef struct payd_client payd_client;

/* What became of a call. Anything but PAYD_OK is a failure; payd_result says more. */
typedef enum payd_status {
    PAYD_OK = 0,       /* the server answered with a status below 400 */
    PAYD_ERR_HTTP,     /* the server answered with an error status: http_status and code */
    PAYD_ERR_NETWORK,  /* no answer: connection refused or dropped, attempt timed out */
    PAYD_ERR_DEADLINE, /* the overall deadline passed before a final answer */
    PAYD_ERR_USAGE,    /* the caller's arguments are invalid; nothing was sent */
    PAYD_ERR_PROTOCOL, /* the server's answer could not be understood (e.g. a list page) */
    PAYD_ERR_NOMEM,
} payd_status;

/* Why the client stopped retrying a retryable failure. */
typedef enum payd_give_up {
    PAYD_GIVE_UP_NONE = 0,    /* it did not give up: success or a failure never retried */
    PAYD_GIVE_UP_MAX_RETRIES, /* max_retries retries were made */
    PAYD_GIVE_UP_DEADLINE,    /* the next attempt would start after the deadline */
    PAYD_GIVE_UP_RETRY_AFTER, /* the server's Retry-After is longer than max_delay */
} payd_give_up;

/* The outcome of one logical call. Strings are always NUL-terminated, "" when absent. */
typedef struct payd_result {
    payd_status status;
    int http_status;      /* the last answer's status; 0 if there was none */
    char code[64];        /* the problem's `code` (e.g. "card_declined") on an error status */
    char message[256];    /* the problem's `detail`, or what went wrong on the way */
    bool retryable;       /* the failure is of a kind §14 retries (so the client gave up on it) */
    payd_give_up give_up; /* why it gave up, when retryable */
    int attempts;         /* HTTP attempts made, 1 + retries */
    bool replayed;        /* the answer carried Idempotent-Replayed: true */
    char idempotency_key[256]; /* the key every attempt sent ("" for GET, PUT, PATCH) */
    char request_id[129];      /* X-Request-Id of the last answer */
    char etag[64];             /* ETag of the last answer */
    char location[256];        /* Location of the last answer */
    char *body;                /* the last answer's body (JSON text), or NULL */
    size_t body_len;
} payd_result;

/* Retry policy and time limits (§14). Start from payd_retry_policy_default(). */
typedef struct payd_retry_policy {
    int max_retries;       /* retries after the first attempt (default 4); 0 = never retry */
    int64_t base_delay_ms; /* nominal delay before retry 1, doubled each time (default 1000) */
    int64_t max_delay_ms;  /* cap on the nominal delay; a longer Retry-After gives up (30000) */
    int64_t deadline_ms;   /* whole logical call, all attempts and waits (default 120000);
                              0 = no deadline */
    int64_t attempt_timeout_ms; /* one HTTP attempt (default 30000) */
    int64_t connect_timeout_ms; /* one TCP connect (default 5000) */
} payd_retry_policy;

/* Time goes through these hooks, so tests can run the retry policy without waiting.
 * A NULL member means the real clock or sleep. */
typedef struct payd_time_hooks {
    int64_t (*monotonic_ms)(void *ctx);      /* for the deadline */
    int64_t (*wall_clock_ms)(void *ctx);     /* Unix time, for Retry-After HTTP-dates */
    void (*sleep_ms)(void *ctx, int64_t ms); /* the wait between attempts */
    void *ctx;
} payd_time_hooks;

/* What one attempt did and what the client decided next; see payd_client_set_observer(). */
typedef enum payd_next_step {
    PAYD_STEP_DONE,   /* final answer (success or a failure never retried) */
    PAYD_STEP_RETRY,  /* will wait delay_ms, then try again */
    PAYD_STEP_GIVE_UP /* a retryable failure, but no more tries: see give_up */
} payd_next_step;

typedef struct payd_attempt {
    const char *method;
    const char *path;
    int attempt;            /* 1 for the first try */
    int http_status;        /* 0 when there was no answer */
    const char *code;       /* problem code, or "" */
    const char *error;      /* transport error when there was no answer, or "" */
    int64_t retry_after_ms; /* the server's Retry-After, -1 if none */
    int64_t elapsed_ms;     /* how long this attempt took */
    payd_next_step next;
    int64_t delay_ms;            /* the wait chosen before the next attempt (PAYD_STEP_RETRY) */
    payd_give_up give_up;        /* PAYD_STEP_GIVE_UP: why */
    const char *idempotency_key; /* "" when none was sent */
} payd_attempt;

typedef void (*payd_observer_fn)(void *ctx, const payd_attempt *attempt);

/* A name and a value: query parameters, metadata entries. */
typedef struct payd_param {
    const char *name;
    const char *value;
} payd_param;

/* ---- the handle ---- */

/* base_url like "http://127.0.0.1:8080" (a trailing '/' is fine); api_key is sent as a Bearer
 * token. NULL when an argument is missing or memory is short. */
PAYD_API payd_client *payd_client_new(const char *base_url, const char *api_key);
PAYD_API void payd_client_free(payd_client *client);

PAYD_API void payd_retry_policy_default(payd_retry_policy *policy);
/* PAYD_ERR_USAGE when a value is negative or max_delay_ms < base_delay_ms. */
PAYD_API payd_status payd_client_set_retry_policy(payd_client *client,
                                                  const payd_retry_policy *policy);
PAYD_API void payd_client_get_retry_policy(const payd_client *client, payd_retry_policy *policy);
PAYD_API void payd_client_set_time_hooks(payd_client *client, const payd_time_hooks *hooks);
/* Called after every attempt (payctl --verbose prints these). NULL to stop. */
PAYD_API void payd_client_set_observer(payd_client *client, payd_observer_fn fn, void *ctx);

/* ---- results ---- */

PAYD_API void payd_result_clear(payd_result *result);
PAYD_API const char *payd_status_name(payd_status status);
PAYD_API const char *payd_give_up_name(payd_give_up reason);

/* ---- the generic call ---- */

typedef struct payd_request {
    const char *method;      /* "GET", "POST", "PUT", "PATCH", "DELETE" */
    const char *path;        /* "/v1/payments"; path segments already escaped */
    const payd_param *query; /* appended as ?name=value&..., values escaped here */
    size_t query_len;
    const char *body;            /* JSON text, or NULL */
    const char *idempotency_key; /* POST only; NULL = a fresh UUIDv4 for this logical call */
    const char *if_match;        /* If-Match header, or NULL */
} payd_request;

/* Sends the request, retrying as the policy says. Returns result->status. */
PAYD_API payd_status payd_call(payd_client *client, const payd_request *request,
                               payd_result *result);

/* ---- common operations (bodies built for you; results are the server's JSON) ---- */

typedef struct payd_payment_params {
    const char *account_id; /* required */
    int64_t amount;         /* minor units, required */
    const char *currency;   /* required, e.g. "USD" */
    const char *source;     /* required, e.g. "tok_visa" */
    const char *order_id;   /* optional */
    const char *description;
    const payd_param *metadata;
    size_t metadata_len;
    const char *idempotency_key; /* NULL = generated */
    const char *capture_method;  /* optional: "automatic" (default) or "manual" (§17) */
} payd_payment_params;

PAYD_API payd_status payd_payment_create(payd_client *client, const payd_payment_params *params,
                                         payd_result *result);
PAYD_API payd_status payd_payment_get(payd_client *client, const char *payment_id,
                                      payd_result *result);
/* amount 0 refunds all that is left; reason and idempotency_key may be NULL. */
PAYD_API payd_status payd_refund_create(payd_client *client, const char *payment_id, int64_t amount,
                                        const char *reason, const char *idempotency_key,
                                        payd_result *result);
/* §17: captures amount of a manual payment's hold (0: all that is capturable); final_capture
 * releases the rest, else it stays capturable. idempotency_key may be NULL (generated). */
PAYD_API payd_status payd_payment_capture(payd_client *client, const char *payment_id,
                                          int64_t amount, bool final_capture,
                                          const char *idempotency_key, payd_result *result);
/* §17: releases what is left of a manual payment's hold; reason and idempotency_key may be
 * NULL. */
PAYD_API payd_status payd_payment_cancel(payd_client *client, const char *payment_id,
                                         const char *reason, const char *idempotency_key,
                                         payd_result *result);
/* name may be NULL. */
PAYD_API payd_status payd_account_create(payd_client *client, const char *currency,
                                         const char *name, payd_result *result);
PAYD_API payd_status payd_account_get(payd_client *client, const char *account_id,
                                      payd_result *result);
/* The ledger (docs/ledger.md): {"object": "balance", "available", "pending", "currency"}. */
PAYD_API payd_status payd_balance_get(payd_client *client, const char *account_id,
                                      payd_result *result);
/* One balance transaction (txn_...): a ledger line on one of the caller's accounts. */
PAYD_API payd_status payd_balance_transaction_get(payd_client *client, const char *transaction_id,
                                                  payd_result *result);
/* filters: status, created_gte, created_lt (may be NULL/0). *count receives the number. */
PAYD_API payd_status payd_payments_count(payd_client *client, const char *account_id,
                                         const payd_param *filters, size_t filters_len,
                                         int64_t *count, payd_result *result);

/* Sends an event again now (docs/webhooks.md, "Redelivery and recovery"): to endpoint_id, or,
 * when it is NULL, to every enabled endpoint that wants the event's type. 202: what was queued.
 * idempotency_key may be NULL (a fresh one, the same on every retry of this call). */
PAYD_API payd_status payd_event_redeliver(payd_client *client, const char *event_id,
                                          const char *endpoint_id, const char *idempotency_key,
                                          payd_result *result);
/* Queues again every delivery of the endpoint that failed at or after `since` (RFC 3339), and
 * brings forward those still retrying. 202: how many. */
PAYD_API payd_status payd_webhook_endpoint_recover(payd_client *client, const char *endpoint_id,
                                                   const char *since, const char *idempotency_key,
                                                   payd_result *result);

/* ---- lists (§4): an iterator that follows next_cursor until has_more is false ---- */

typedef struct payd_list payd_list;

/* path is a list route ("/v1/accounts/acct_.../payments"); query holds filters and limit (and
 * a cursor to start from). No request is made until the first payd_list_next(). */
PAYD_API payd_list *payd_list_open(payd_client *client, const char *path, const payd_param *query,
                                   size_t query_len);
PAYD_API payd_list *payd_payments_list(payd_client *client, const char *account_id,
                                       const payd_param *query, size_t query_len);
/* The caller's balance transactions, newest first; query: account_id, type, source,
 * created_gte, created_lt, limit (may be NULL/0). */
PAYD_API payd_list *payd_balance_transactions_list(payd_client *client, const payd_param *query,
                                                   size_t query_len);
/* PAYD_OK with *item_json set to the next item (valid until the next call), or PAYD_OK with
 * *item_json == NULL once the list is exhausted. Any other status: the page request failed;
 * payd_list_result() tells why, and calling again retries that page. */
PAYD_API payd_status payd_list_next(payd_list *list, const char **item_json);
PAYD_API const payd_result *payd_list_result(const payd_list *list); /* last page request */
PAYD_API long payd_list_pages(const payd_list *list);                /* pages fetched so far */
PAYD_API long payd_list_items(const payd_list *list);                /* items returned so far */
PAYD_API void payd_list_close(payd_list *list);

/* ---- helpers ---- */

/* Percent-encodes everything but RFC 3986 unreserved characters, for a path segment or a query
 * value. Free with payd_free(). NULL when memory is short. */
PAYD_API char *payd_escape(const char *text);
/* A fresh random UUIDv4 (36 chars + NUL), as used for Idempotency-Keys. 0 ok / -1. */
PAYD_API int payd_uuid4(char out[37]);
PAYD_API void payd_free(void *memory);

/* ---- webhooks (§15): verifying what payd sends to your endpoint ---- */

typedef enum payd_webhook_check {
    PAYD_WEBHOOK_OK = 0,
    PAYD_WEBHOOK_MALFORMED,     /* no t= or no v1= in the Payd-Signature header */
    PAYD_WEBHOOK_BAD_SIGNATURE, /* no v1= matches the body and timestamp under this secret */
    PAYD_WEBHOOK_TOO_OLD,       /* t= is further than the tolerance from now (either way) */
} payd_webhook_check;

#define PAYD_WEBHOOK_TOLERANCE_S 300 /* five minutes */

/* Checks a delivery: signature_header is the Payd-Signature value ("t=<unix>,v1=<hex>", maybe
 * several v1= while a secret rotates), body the raw request body as received (before any JSON
 * parsing). The MAC is compared in constant time. tolerance_s <= 0 means
 * PAYD_WEBHOOK_TOLERANCE_S; now_s <= 0 means the current time. A timestamp outside the window
 * is refused even with a good MAC, so a captured request cannot be replayed later. */
PAYD_API payd_webhook_check payd_webhook_verify(const char *secret, const char *signature_header,
                                                const char *body, size_t body_len,
                                                int64_t tolerance_s, int64_t now_s);
/* Writes "t=<unix_s>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>" into out (cap >= 96): what
 * payd sends, for tests and for forwarding (payctl listen). 0 ok, -1 when out is too small. */
PAYD_API int payd_webhook_sign(const char *secret, int64_t unix_s, const char *body,
                               size_t body_len, char *out, size_t cap);
PAYD_API const char *payd_webhook_check_name(payd_webhook_check check);

/* Standard Webhooks (docs/webhooks.md): payd also signs every delivery with the headers
 * webhook-id, webhook-timestamp and webhook-signature ("v1,<base64 HMAC-SHA256(key,
 * "<id>.<timestamp>.<body>")>", several space-separated while a secret rotates), where key is
 * the base64 decoding of the secret after its optional "whsec_" prefix (padding optional).
 * Checks a delivery with the three header values and the raw body: MALFORMED when a header is
 * missing, the timestamp is not an integer or the secret not base64; BAD_SIGNATURE when no v1
 * signature matches (compared in constant time); TOO_OLD when the timestamp is further than
 * tolerance_s from now_s. now_s <= 0: the current time; tolerance_s <= 0:
 * PAYD_WEBHOOK_TOLERANCE_S. */
PAYD_API payd_webhook_check payd_webhook_verify_standard(const char *secret, const char *webhook_id,
                                                         const char *webhook_timestamp,
                                                         const char *webhook_signature,
                                                         const char *body, size_t body_len,
                                                         int64_t now_s, int64_t tolerance_s);
/* "v1,<base64>" (47 characters and a NUL) */
#define PAYD_WEBHOOK_STANDARD_SIGNATURE_MAX 48
/* Writes the webhook-signature value for a delivery into out (cap >=
 * PAYD_WEBHOOK_STANDARD_SIGNATURE_MAX): for tests and for forwarding (payctl listen). 0 ok, -1
 * when out is too small or the secret is not base64. */
PAYD_API int payd_webhook_sign_standard(const char *secret, const char *webhook_id, int64_t unix_s,
                                        const char *body, size_t body_len, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif

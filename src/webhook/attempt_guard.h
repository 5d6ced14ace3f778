#ifndef PAYD_WEBHOOK_ATTEMPT_GUARD_H
#define PAYD_WEBHOOK_ATTEMPT_GUARD_H
/* What one delivery attempt may do on the wire, and what happened, in payd's own words
 * (docs/webhooks.md, "What an attempt records"):
 *
 * - with --webhook-deny-private it connects only to allowed addresses (address_policy.h),
 *   checked on each address libcurl is about to connect to;
 * - it reads at most WEBHOOK_BODY_CAP bytes of the response body and WEBHOOK_HEADERS_CAP of
 *   its headers, then the transfer is cut and its connection closed;
 * - its error is one word of a small fixed vocabulary, never the transport's text, so the
 *   deliveries list tells a merchant what went wrong without describing the network behind. */
#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WEBHOOK_BODY_CAP    (64 * 1024)
#define WEBHOOK_HEADERS_CAP (32 * 1024)

/* The vocabulary of an attempt's `error`. */
#define WEBHOOK_ERR_TIMEOUT           "timeout"
#define WEBHOOK_ERR_DNS               "dns_failure"
#define WEBHOOK_ERR_REFUSED           "connection_refused"
#define WEBHOOK_ERR_ADDRESS           "address_not_allowed"
#define WEBHOOK_ERR_TLS               "tls_error"
#define WEBHOOK_ERR_CONNECTION        "connection_error"
#define WEBHOOK_ERR_BAD_STATUS        "bad_status"
#define WEBHOOK_ERR_BODY_TOO_LARGE    "body_too_large"
#define WEBHOOK_ERR_HEADERS_TOO_LARGE "headers_too_large"

typedef struct webhook_guard {
    bool deny_private;    /* --webhook-deny-private */
    bool address_refused; /* an address was refused at connect time */
    bool body_cut, headers_cut;
    size_t body_bytes, header_bytes;
    char detail[CURL_ERROR_SIZE]; /* the transport's own text: for the log only */
} webhook_guard;

/* Installs the guard's callbacks on an easy handle (the response body is read and dropped). The
 * guard must live as long as the transfer. */
void webhook_guard_attach(CURL *easy, webhook_guard *g, bool deny_private);

/* Delivered: a 2xx status arrived. The status alone decides, so an answer whose body or headers
 * payd cut at the cap still delivers when its status was 2xx. */
bool webhook_attempt_delivered(const webhook_guard *g, CURLcode rc, long status);

/* The attempt's error word, or NULL for a 2xx read whole. A 2xx cut at a cap keeps its word
 * (body_too_large, headers_too_large) next to the outcome "delivered". */
const char *webhook_attempt_error(const webhook_guard *g, CURLcode rc, long status);

/* One log line for an attempt that ended without a clean answer (error set, not bad_status), with
 * the transport's text, which the API never shows: the operator's way to the details. */
void webhook_attempt_log(const webhook_guard *g, uint64_t endpoint_id, uint64_t event_id,
                         const char *error);

/* A stored error as the API shows it: a word of the vocabulary as it is, anything else (rows
 * written before the vocabulary, which held the transport's text) as connection_error. */
const char *webhook_error_word(const char *stored);

#endif

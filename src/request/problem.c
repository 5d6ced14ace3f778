#include "request/problem.h"

#include <string.h>

/* Validation failures and missing targets release the key (§2 "Not stored, key released");
 * business outcomes are stored; processor doubt unlocks. */
static const problem_def problems[ERR_COUNT] = {
    [ERR_NONE] = {200, "ok", "OK", KEY_STORE},
    [ERR_ROUTE_NOT_FOUND] = {404, "route_not_found", "No such route", KEY_RELEASE},
    [ERR_METHOD_NOT_ALLOWED] = {405, "method_not_allowed", "Method not allowed", KEY_RELEASE},
    [ERR_UNAUTHORIZED] = {401, "unauthorized", "Missing or invalid API key", KEY_RELEASE},
    [ERR_RESOURCE_MISSING] = {404, "resource_missing", "No such resource", KEY_RELEASE},
    [ERR_PAYLOAD_TOO_LARGE] = {413, "payload_too_large", "Request body too large", KEY_RELEASE},
    [ERR_UNSUPPORTED_MEDIA_TYPE] = {415, "unsupported_media_type", "Body must be JSON",
                                    KEY_RELEASE},
    [ERR_INVALID_JSON] = {400, "invalid_json", "Malformed JSON", KEY_RELEASE},
    [ERR_UNKNOWN_PARAMETER] = {400, "unknown_parameter", "Unknown parameter", KEY_RELEASE},
    [ERR_MISSING_PARAMETER] = {400, "missing_parameter", "Missing parameter", KEY_RELEASE},
    [ERR_INVALID_PARAMETER] = {400, "invalid_parameter", "Invalid parameter", KEY_RELEASE},
    [ERR_INVALID_LIMIT] = {400, "invalid_limit", "Invalid limit", KEY_RELEASE},
    [ERR_INVALID_CURSOR] = {400, "invalid_cursor", "Invalid cursor", KEY_RELEASE},
    [ERR_CURSOR_MISMATCH] = {400, "cursor_mismatch", "Cursor belongs to another query",
                             KEY_RELEASE},
    [ERR_IDEMPOTENCY_KEY_MISSING] = {400, "idempotency_key_missing",
                                     "Idempotency-Key header required", KEY_RELEASE},
    [ERR_IDEMPOTENCY_KEY_INVALID] = {400, "idempotency_key_invalid", "Invalid Idempotency-Key",
                                     KEY_RELEASE},
    [ERR_IDEMPOTENCY_KEY_REUSED] = {422, "idempotency_key_reused",
                                    "Idempotency-Key reused with a different request", KEY_STORE},
    [ERR_REQUEST_IN_PROGRESS] = {409, "request_in_progress",
                                 "A request with this Idempotency-Key is in progress", KEY_STORE},
    [ERR_CARD_DECLINED] = {402, "card_declined", "Card declined", KEY_STORE},
    [ERR_PROCESSOR_UNAVAILABLE] = {503, "processor_unavailable", "Payment processor unavailable",
                                   KEY_UNLOCK},
    [ERR_DUPLICATE_PAYMENT] = {409, "duplicate_payment", "Order already paid", KEY_STORE},
    [ERR_ORDER_NOT_PAYABLE] = {409, "order_not_payable", "Order cannot be paid", KEY_STORE},
    [ERR_ORDER_MISMATCH] = {400, "order_mismatch", "Amount or currency differs from the order",
                            KEY_RELEASE},
    [ERR_PAYMENT_NOT_REFUNDABLE] = {409, "payment_not_refundable", "Payment cannot be refunded",
                                    KEY_STORE},
    [ERR_AMOUNT_EXCEEDS_REFUNDABLE] = {409, "amount_exceeds_refundable",
                                       "Amount exceeds what is left to refund", KEY_STORE},
    [ERR_PAYMENT_NOT_CAPTURABLE] = {409, "payment_not_capturable", "Payment cannot be captured",
                                    KEY_STORE},
    [ERR_AMOUNT_EXCEEDS_CAPTURABLE] = {409, "amount_exceeds_capturable",
                                       "Amount exceeds what is left to capture", KEY_STORE},
    [ERR_TOO_MANY_CAPTURES] = {409, "too_many_captures", "Too many captures", KEY_STORE},
    [ERR_INSUFFICIENT_FUNDS] = {409, "insufficient_funds", "Insufficient funds", KEY_STORE},
    [ERR_BIZ_SEQ_REUSED] = {422, "biz_seq_reused", "biz_seq reused with a different request",
                            KEY_STORE},
    [ERR_DUPLICATE_ORDER] = {409, "duplicate_order", "Order already exists", KEY_STORE},
    [ERR_INVALID_STATE_TRANSITION] = {409, "invalid_state_transition", "Invalid state transition",
                                      KEY_STORE},
    [ERR_VERSION_CONFLICT] = {409, "version_conflict", "Version conflict", KEY_STORE},
    [ERR_PRECONDITION_FAILED] = {412, "version_conflict", "Precondition failed", KEY_STORE},
    [ERR_DUPLICATE_SKU] = {409, "duplicate_sku", "SKU already exists", KEY_STORE},
    [ERR_OUT_OF_STOCK] = {409, "out_of_stock", "Not enough stock", KEY_STORE},
    /* a balance or a sum of money would pass the largest 64-bit integer: refused, nothing moved */
    [ERR_BALANCE_LIMIT_EXCEEDED] = {409, "balance_limit_exceeded",
                                    "The balance would exceed its limit", KEY_STORE},
    [ERR_RATE_LIMITED] = {429, "rate_limited", "Too many requests", KEY_RELEASE},
    [ERR_HEADERS_TOO_LARGE] = {431, "headers_too_large", "Request headers too large", KEY_RELEASE},
    [ERR_INVALID_HEADER] = {400, "invalid_header", "Invalid header", KEY_RELEASE},
    [ERR_REQUEST_TIMEOUT] = {408, "request_timeout", "Request not received in time", KEY_RELEASE},
    [ERR_URI_TOO_LONG] = {414, "uri_too_long", "URI too long", KEY_RELEASE},
    [ERR_BAD_FRAMING] = {400, "bad_framing", "Ambiguous message framing", KEY_RELEASE},
    [ERR_OVERLOADED] = {503, "overloaded", "Server overloaded", KEY_RELEASE},
    /* one client's own excess (connections per address, requests per API key): its 429, while
     * every other client is served */
    [ERR_TOO_MANY_CONNECTIONS] = {429, "too_many_connections",
                                  "Too many connections from this client", KEY_RELEASE},
    [ERR_TOO_MANY_IN_PROGRESS] = {429, "too_many_requests_in_progress",
                                  "Too many requests of this API key in progress", KEY_RELEASE},
    [ERR_SHUTTING_DOWN] = {503, "shutting_down", "Server shutting down", KEY_RELEASE},
    [ERR_NOT_READY] = {503, "not_ready", "Database unavailable", KEY_RELEASE},
    [ERR_API_KEY_IN_USE] = {409, "api_key_in_use",
                            "The API key making this request cannot revoke itself", KEY_RELEASE},
    /* a cap per user (--max-api-keys, --max-webhook-endpoints): nothing was made, and the same
     * request may succeed once one is revoked or deleted */
    [ERR_API_KEY_LIMIT_REACHED] = {409, "api_key_limit_reached", "Too many active API keys",
                                   KEY_RELEASE},
    [ERR_WEBHOOK_ENDPOINT_LIMIT_REACHED] = {409, "webhook_endpoint_limit_reached",
                                            "Too many webhook endpoints", KEY_RELEASE},
    /* nothing was queued: enable the endpoint (PATCH) and send again with the same key */
    [ERR_WEBHOOK_ENDPOINT_DISABLED] = {409, "webhook_endpoint_disabled",
                                       "Webhook endpoint disabled", KEY_RELEASE},
    /* the database went away mid-request: what was written is unknown, so a claimed key stays
     * for the retry to resume */
    [ERR_DATABASE_UNAVAILABLE] = {503, "database_unavailable", "Database unavailable", KEY_UNLOCK},
    /* a lock or statement timeout after the key was claimed: as above, the retry resumes */
    [ERR_DATABASE_TIMEOUT] = {503, "database_timeout", "Database busy", KEY_UNLOCK},
    [ERR_INTERNAL] = {500, "internal_error", "Internal error", KEY_UNLOCK},
};

const problem_def *problem_lookup(payd_error err)
{
    return (err > ERR_NONE && err < ERR_COUNT) ? &problems[err] : &problems[ERR_INTERNAL];
}

const problem_def *problem_by_code(const char *code)
{
    for (int i = 1; i < ERR_COUNT; i++)
        if (!strcmp(problems[i].code, code))
            return &problems[i];
    return NULL;
}

#ifndef PAYD_REQUEST_PROBLEM_H
#define PAYD_REQUEST_PROBLEM_H
/* The one table of errors: each internal error maps to an HTTP status, a stable `code`, a title,
 * and what the idempotency engine does with a key whose request ended in it. */
#include <stdbool.h>

#include "http/refusal.h"

/* The HTTP layer's refusals come first, under their own numbers (http/refusal.h). */
typedef enum payd_error {
    ERR_NONE = HTTP_REFUSAL_NONE,
    ERR_PAYLOAD_TOO_LARGE = HTTP_REFUSAL_PAYLOAD_TOO_LARGE,
    ERR_UNSUPPORTED_MEDIA_TYPE = HTTP_REFUSAL_UNSUPPORTED_MEDIA_TYPE,
    ERR_INVALID_JSON = HTTP_REFUSAL_INVALID_JSON,
    ERR_UNKNOWN_PARAMETER = HTTP_REFUSAL_UNKNOWN_PARAMETER,
    ERR_MISSING_PARAMETER = HTTP_REFUSAL_MISSING_PARAMETER,
    ERR_INVALID_PARAMETER = HTTP_REFUSAL_INVALID_PARAMETER,
    ERR_INVALID_HEADER = HTTP_REFUSAL_INVALID_HEADER,
    ERR_BAD_FRAMING = HTTP_REFUSAL_BAD_FRAMING,
    ERR_ROUTE_NOT_FOUND = HTTP_REFUSAL_COUNT,
    ERR_METHOD_NOT_ALLOWED,
    ERR_UNAUTHORIZED,
    ERR_RESOURCE_MISSING,
    ERR_INVALID_LIMIT,
    ERR_INVALID_CURSOR,
    ERR_CURSOR_MISMATCH,
    ERR_IDEMPOTENCY_KEY_MISSING,
    ERR_IDEMPOTENCY_KEY_INVALID,
    ERR_IDEMPOTENCY_KEY_REUSED,
    ERR_REQUEST_IN_PROGRESS,
    ERR_CARD_DECLINED,
    ERR_PROCESSOR_UNAVAILABLE,
    ERR_DUPLICATE_PAYMENT,
    ERR_ORDER_NOT_PAYABLE,
    ERR_ORDER_MISMATCH,
    ERR_PAYMENT_NOT_REFUNDABLE,
    ERR_AMOUNT_EXCEEDS_REFUNDABLE,
    ERR_PAYMENT_NOT_CAPTURABLE,
    ERR_AMOUNT_EXCEEDS_CAPTURABLE,
    ERR_TOO_MANY_CAPTURES,
    ERR_INSUFFICIENT_FUNDS,
    ERR_BIZ_SEQ_REUSED,
    ERR_DUPLICATE_ORDER,
    ERR_INVALID_STATE_TRANSITION,
    ERR_VERSION_CONFLICT,
    ERR_PRECONDITION_FAILED,
    ERR_DUPLICATE_SKU,
    ERR_OUT_OF_STOCK,
    ERR_BALANCE_LIMIT_EXCEEDED,
    ERR_RATE_LIMITED,
    ERR_HEADERS_TOO_LARGE,
    ERR_REQUEST_TIMEOUT,
    ERR_URI_TOO_LONG,
    ERR_OVERLOADED,
    ERR_TOO_MANY_CONNECTIONS,
    ERR_TOO_MANY_IN_PROGRESS,
    ERR_SHUTTING_DOWN,
    ERR_NOT_READY,
    ERR_API_KEY_IN_USE,
    ERR_API_KEY_LIMIT_REACHED,
    ERR_WEBHOOK_ENDPOINT_LIMIT_REACHED,
    ERR_WEBHOOK_ENDPOINT_DISABLED,
    ERR_DATABASE_UNAVAILABLE,
    ERR_DATABASE_TIMEOUT,
    ERR_INTERNAL,
    ERR_COUNT
} payd_error;

/* The HTTP layer's refusal as the error it is (the same number). */
static inline payd_error error_of_refusal(http_refusal r)
{
    return (payd_error)r;
}

/* What happens to a claimed Idempotency-Key when its request ends in this error. */
typedef enum key_disposition {
    KEY_STORE,   /* the answer is the operation's result: stored and replayed */
    KEY_RELEASE, /* nothing happened: the key is freed so a corrected request may reuse it */
    KEY_UNLOCK,  /* in doubt: the key stays claimed but unlocked, a retry resumes the operation */
} key_disposition;

typedef struct problem_def {
    int status;
    const char *code;
    const char *title;
    key_disposition key;
} problem_def;

const problem_def *problem_lookup(payd_error err);
/* The problem whose code is `code`, or NULL. */
const problem_def *problem_by_code(const char *code);

#endif

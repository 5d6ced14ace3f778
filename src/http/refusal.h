#ifndef PAYD_HTTP_REFUSAL_H
#define PAYD_HTTP_REFUSAL_H
/* Why the generic HTTP layer refuses a request: its edge checks (validate.h) and declared
 * inputs (schema.h). It knows no status, code or title: the application's own error table
 * (request/problem.h) gives them, and its error numbers begin with these, so a refusal is
 * one of its errors as it stands. */
typedef enum http_refusal {
    HTTP_REFUSAL_NONE = 0,
    HTTP_REFUSAL_PAYLOAD_TOO_LARGE,
    HTTP_REFUSAL_UNSUPPORTED_MEDIA_TYPE,
    HTTP_REFUSAL_INVALID_JSON,
    HTTP_REFUSAL_UNKNOWN_PARAMETER,
    HTTP_REFUSAL_MISSING_PARAMETER,
    HTTP_REFUSAL_INVALID_PARAMETER,
    HTTP_REFUSAL_INVALID_HEADER,
    HTTP_REFUSAL_BAD_FRAMING,
    HTTP_REFUSAL_COUNT /* the application's own errors are numbered from here */
} http_refusal;

#endif

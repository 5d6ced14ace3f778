#ifndef PAYD_HTTP_VALIDATE_H
#define PAYD_HTTP_VALIDATE_H
/* The edge checks every request passes before a route handler, a key claim or a rate limit:
 * framing, singleton headers, control bytes, and the route's declared query parameters.
 * Pure functions over (name, length, value, length) pairs, so the fuzzer drives them without a
 * socket and the lengths keep embedded NUL bytes visible (C strings would cut at them). */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "http/refusal.h"

typedef struct http_field {
    const char *name;
    size_t name_len;
    const char *value; /* NULL for a query parameter without '=' */
    size_t value_len;
    bool cut_at_nul; /* the HTTP library cut the value at a NUL byte it did not report */
} http_field;

typedef struct edge_verdict {
    http_refusal err; /* HTTP_REFUSAL_NONE: the request may go on */
    char param[64];   /* the header or query parameter at fault (printable, truncated) */
    const char *detail;
} edge_verdict;

/* Headers: each name of singletons (a NULL-terminated list the caller keeps: the headers whose
 * repetition would let two readers see two values) at most once, no NUL or other control byte
 * in any value. */
bool edge_check_headers(const http_field *headers, size_t n, const char *const *singletons,
                        edge_verdict *v);
/* What decides where the message ends, checked before the body is read (the caller answers
 * 400 and closes, so the bytes after the headers are never read as a body or a next request):
 * every header name a token (no space before the colon), Host at most once, Transfer-Encoding
 * at most once and exactly `chunked`, and not together with Content-Length (RFC 9112 §5.1,
 * §3.2, §6.1). */
bool edge_check_framing(const http_field *headers, size_t n, edge_verdict *v);
/* Transfer-Encoding together with Content-Length (one of the checks above). */
bool edge_framing_conflict(const http_field *headers, size_t n);
/* Query: only the names the schema declares (NULL accepts none), each at most once, no control
 * byte in a name or value. */
struct schema;
bool edge_check_query(const http_field *query, size_t n, const struct schema *accepted,
                      edge_verdict *v);
/* A POST/PUT/PATCH body (§1): 413 when it was too large, 415 unless Content-Type is JSON, 400
 * invalid_json unless it is one JSON object. No body and no Content-Type is an empty object. On
 * success *out holds the object (the caller owns it). The detail is written into detail. */
bool edge_parse_body(const char *content_type, const char *body, size_t len, bool too_large,
                     json_t **out, edge_verdict *v, char *detail, size_t detail_len);

#endif

#include "http/validate.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "http/schema.h"

static bool name_is(const http_field *f, const char *name)
{
    return f->name_len == strlen(name) && !strncasecmp(f->name, name, f->name_len);
}

/* NUL, C0 controls except HTAB, and DEL. */
static bool has_control_byte(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return true;
    }
    return false;
}

/* The name as it can safely appear in a problem's `param`: control bytes become '?'. */
static void name_param(edge_verdict *v, const http_field *f)
{
    size_t n = f->name_len < sizeof v->param - 1 ? f->name_len : sizeof v->param - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)f->name[i];
        v->param[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    v->param[n] = '\0';
}

static bool refuse(edge_verdict *v, http_refusal err, const http_field *f, const char *detail)
{
    v->err = err;
    name_param(v, f);
    v->detail = detail;
    return false;
}

bool edge_check_headers(const http_field *h, size_t n, const char *const *singletons,
                        edge_verdict *v)
{
    v->err = HTTP_REFUSAL_NONE;
    for (size_t i = 0; i < n; i++) {
        if (h[i].cut_at_nul || (h[i].value && has_control_byte(h[i].value, h[i].value_len)))
            return refuse(v, HTTP_REFUSAL_INVALID_HEADER, &h[i],
                          "a header value holds a NUL or other control byte");
        for (const char *const *s = singletons; *s; s++) {
            if (!name_is(&h[i], *s))
                continue;
            for (size_t j = 0; j < i; j++)
                if (name_is(&h[j], *s))
                    return refuse(v, HTTP_REFUSAL_INVALID_HEADER, &h[i],
                                  "this header may appear only once");
        }
    }
    return true;
}

/* RFC 9110 §5.6.2: a field name is one or more tchar. */
static bool is_token(const char *s, size_t n)
{
    static const char specials[] = "!#$%&'*+-.^_`|~";
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (!alnum && (!c || !strchr(specials, c)))
            return false;
    }
    return true;
}

bool edge_check_framing(const http_field *h, size_t n, edge_verdict *v)
{
    v->err = HTTP_REFUSAL_NONE;
    bool te = false, host = false;
    for (size_t i = 0; i < n; i++) {
        /* `Content-Length : 5` reaches us as a header named "Content-Length ": the library
         * would frame the message without it and read the body as the next request */
        if (!is_token(h[i].name, h[i].name_len))
            return refuse(v, HTTP_REFUSAL_BAD_FRAMING, &h[i],
                          "a header name holds a space or a character no field name may hold "
                          "(RFC 9112 §5.1)");
        if (name_is(&h[i], "Host")) {
            if (host)
                return refuse(v, HTTP_REFUSAL_BAD_FRAMING, &h[i],
                              "Host may appear only once (RFC 9112 §3.2)");
            host = true;
        }
        if (name_is(&h[i], "Transfer-Encoding")) {
            /* the library frames a chunked body only for exactly `chunked`; anything else (a
             * list, identity, gzip) would leave the body to be read as the next request */
            if (te || h[i].value_len != 7 || strncasecmp(h[i].value, "chunked", 7))
                return refuse(v, HTTP_REFUSAL_BAD_FRAMING, &h[i],
                              "the only Transfer-Encoding accepted is one `chunked`");
            te = true;
        }
    }
    static const http_field te_field = {"Transfer-Encoding", 17, NULL, 0, false};
    if (edge_framing_conflict(h, n)) /* RFC 9112 §6.1: the bytes could be read two ways */
        return refuse(v, HTTP_REFUSAL_BAD_FRAMING, &te_field,
                      "Transfer-Encoding and Content-Length together are refused");
    return true;
}

bool edge_framing_conflict(const http_field *h, size_t n)
{
    bool te = false, cl = false;
    for (size_t i = 0; i < n; i++) {
        te |= name_is(&h[i], "Transfer-Encoding");
        cl |= name_is(&h[i], "Content-Length");
    }
    return te && cl;
}

bool edge_check_query(const http_field *q, size_t n, const schema *accepted, edge_verdict *v)
{
    v->err = HTTP_REFUSAL_NONE;
    for (size_t i = 0; i < n; i++) {
        bool known = false;
        for (int a = 0; accepted && a < accepted->count && !known; a++) {
            const char *name = accepted->fields[a].name;
            known = name_is(&q[i], name) && !strncmp(q[i].name, name, q[i].name_len);
        }
        if (!known)
            return refuse(v, HTTP_REFUSAL_UNKNOWN_PARAMETER, &q[i],
                          "this route does not take that query parameter");
        if (q[i].value && has_control_byte(q[i].value, q[i].value_len))
            return refuse(v, HTTP_REFUSAL_INVALID_PARAMETER, &q[i],
                          "a query value holds a NUL or other control byte");
        for (size_t j = 0; j < i; j++)
            if (q[j].name_len == q[i].name_len && !memcmp(q[j].name, q[i].name, q[i].name_len))
                return refuse(v, HTTP_REFUSAL_INVALID_PARAMETER, &q[i],
                              "a query parameter may appear only once");
    }
    return true;
}

static bool json_content_type(const char *ct)
{
    if (!ct)
        return false;
    while (*ct == ' ')
        ct++;
    size_t n = strlen("application/json");
    return !strncasecmp(ct, "application/json", n) &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

bool edge_parse_body(const char *content_type, const char *body, size_t len, bool too_large,
                     json_t **out, edge_verdict *v, char *detail, size_t detail_len)
{
    *out = NULL;
    v->err = HTTP_REFUSAL_NONE;
    v->param[0] = '\0';
    v->detail = detail;
    if (too_large) {
        v->err = HTTP_REFUSAL_PAYLOAD_TOO_LARGE;
        snprintf(detail, detail_len, "the request body exceeds 64 KiB");
        return false;
    }
    if (len == 0 && !content_type) {
        *out = json_object(); /* no body at all: an empty object, as for optional fields */
        return true;
    }
    if (!json_content_type(content_type)) {
        v->err = HTTP_REFUSAL_UNSUPPORTED_MEDIA_TYPE;
        snprintf(detail, detail_len, "send the body as Content-Type: application/json");
        return false;
    }
    json_error_t jerr;
    json_t *j = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (!j) {
        v->err = HTTP_REFUSAL_INVALID_JSON;
        snprintf(detail, detail_len, "malformed JSON at line %d column %d: %s", jerr.line,
                 jerr.column, jerr.text);
        return false;
    }
    if (!json_is_object(j)) {
        json_decref(j);
        v->err = HTTP_REFUSAL_INVALID_JSON;
        snprintf(detail, detail_len, "the body must be a JSON object");
        return false;
    }
    *out = j;
    return true;
}

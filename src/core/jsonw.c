#include "core/jsonw.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "core/timefmt.h"

void jw_init(jsonw *w)
{
    memset(w, 0, sizeof *w);
    w->first[0] = true;
    w->livemode = -1;
}

void jw_init_mode(jsonw *w, bool live)
{
    jw_init(w);
    w->livemode = live;
}

void jw_free(jsonw *w)
{
    signed char livemode = w->livemode;
    free(w->buf);
    jw_init(w);
    w->livemode = livemode;
}

static void reserve(jsonw *w, size_t more)
{
    if (w->len + more + 1 <= w->cap)
        return;
    size_t cap = w->cap ? w->cap : 4096; /* a list page of 20 payments is ~9 KiB */
    while (cap < w->len + more + 1)
        cap *= 2;
    char *grown = realloc(w->buf, cap);
    if (!grown)
        abort(); /* out of memory: nothing sensible to answer */
    w->buf = grown;
    w->cap = cap;
}

static void put(jsonw *w, const char *s, size_t n)
{
    reserve(w, n);
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

/* A value or key at the current depth: a comma unless it is the first, none after a key. */
static void separate(jsonw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (!w->first[w->depth])
        put(w, ",", 1);
    w->first[w->depth] = false;
}

void jw_end_line(jsonw *w)
{
    put(w, "\n", 1);
    w->first[0] = true;
}

char *jw_take(jsonw *w, size_t *len)
{
    if (!w->buf)
        put(w, "", 0);
    char *out = w->buf;
    if (len)
        *len = w->len;
    w->buf = NULL;
    jw_free(w);
    return out;
}

static void open_nested(jsonw *w, char c)
{
    separate(w);
    put(w, &c, 1);
    if (w->depth + 1 < JSONW_MAX_DEPTH)
        w->depth++;
    w->first[w->depth] = true;
}

static void close_nested(jsonw *w, char c)
{
    if (w->depth > 0)
        w->depth--;
    put(w, &c, 1);
}

void jw_object_begin(jsonw *w)
{
    open_nested(w, '{');
}

void jw_object_end(jsonw *w)
{
    close_nested(w, '}');
}

void jw_object_reopen(jsonw *w)
{
    if (!w->len || w->buf[w->len - 1] != '}' || w->depth + 1 >= JSONW_MAX_DEPTH)
        return;
    w->buf[--w->len] = '\0';
    w->depth++;
    w->first[w->depth] = w->buf[w->len - 1] == '{';
}

void jw_array_begin(jsonw *w)
{
    open_nested(w, '[');
}

void jw_array_end(jsonw *w)
{
    close_nested(w, ']');
}

/* A member's key with its comma, and room for `value` more bytes after it: one reserve, one
 * copy (a list page writes some 400 keys). */
static void member_key(jsonw *w, const char *key, size_t n, size_t value)
{
    reserve(w, n + 4 + value);
    char *o = w->buf + w->len;
    if (w->after_key)
        w->after_key = false;
    else if (!w->first[w->depth])
        *o++ = ',';
    w->first[w->depth] = false;
    *o++ = '"';
    memcpy(o, key, n);
    o += n;
    *o++ = '"';
    *o++ = ':';
    *o = '\0';
    w->len = (size_t)(o - w->buf);
}

void jw_key_n(jsonw *w, const char *key, size_t n)
{
    member_key(w, key, n, 0);
    w->after_key = true;
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates),
 * or 0. */
static size_t utf8_sequence_length(const unsigned char *p)
{
    unsigned char c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

void jw_string(jsonw *w, const char *s)
{
    if (!s) {
        jw_null(w);
        return;
    }
    separate(w);
    size_t n = strlen(s);
    reserve(w, n * 6 + 2); /* the worst case: every byte escaped as \u00XX */
    char *o = w->buf + w->len;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        /* the common case, a run of printable ASCII that needs no escape, is copied at once */
        const unsigned char *run = p;
        while (*p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        memcpy(o, run, (size_t)(p - run));
        o += p - run;
        if (!*p)
            break;
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c < 0x20) {
            static const char hex[] = "0123456789abcdef";
            const char *named = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
            if (named) {
                memcpy(o, named, 2);
                o += 2;
            } else {
                memcpy(o, "\\u00", 4);
                o[4] = hex[c >> 4];
                o[5] = hex[c & 15];
                o += 6;
            }
        } else if (c < 0x80) {
            *o++ = (char)c;
        } else {
            /* Valid UTF-8 passes through; any other byte (a client's raw method, say) becomes
             * U+FFFD, so the output is always valid JSON. */
            size_t seq = utf8_sequence_length(p);
            if (seq) {
                memcpy(o, p, seq);
                o += seq;
                p += seq - 1;
            } else {
                memcpy(o, "\\ufffd", 6);
                o += 6;
            }
        }
    }
    *o++ = '"';
    w->len = (size_t)(o - w->buf);
    w->buf[w->len] = '\0';
}

/* v in decimal, written at the end of digits: returns where it starts, its length in *n. */
static const char *int_digits(int64_t v, char digits[24], size_t *n)
{
    char *end = digits + 24, *p = end;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v; /* INT64_MIN too */
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    *n = (size_t)(end - p);
    return p;
}

void jw_int(jsonw *w, int64_t v)
{
    separate(w);
    char digits[24];
    size_t n;
    const char *p = int_digits(v, digits, &n);
    put(w, p, n);
}

void jw_bool(jsonw *w, bool v)
{
    separate(w);
    put(w, v ? "true" : "false", v ? 4 : 5);
}

void jw_null(jsonw *w)
{
    separate(w);
    put(w, "null", 4);
}

void jw_raw(jsonw *w, const char *json, const char *fallback)
{
    separate(w);
    const char *text = json ? json : fallback;
    put(w, text, strlen(text));
}

void jw_member_string_n(jsonw *w, const char *key, size_t key_len, const char *s)
{
    jw_key_n(w, key, key_len);
    jw_string(w, s);
}

void jw_member_object(jsonw *w, const char *type)
{
    jw_member_string_n(w, "object", 6, type);
    if (w->livemode >= 0) {
        jw_key_n(w, "livemode", 8);
        jw_bool(w, w->livemode);
    }
}

void jw_member_int_n(jsonw *w, const char *key, size_t key_len, int64_t v)
{
    char digits[24];
    size_t n;
    const char *p = int_digits(v, digits, &n);
    member_key(w, key, key_len, n);
    memcpy(w->buf + w->len, p, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

/* A member whose value is n bytes of text that needs no escaping (an id, a time), quoted. */
static void member_quoted(jsonw *w, const char *key, size_t key_len, const char *s, size_t n)
{
    member_key(w, key, key_len, n + 2);
    char *o = w->buf + w->len;
    *o++ = '"';
    memcpy(o, s, n);
    o += n;
    *o++ = '"';
    *o = '\0';
    w->len = (size_t)(o - w->buf);
}

void jw_member_id_n(jsonw *w, const char *key, size_t key_len, const char *prefix, uint64_t id)
{
    if (!id) {
        jw_key_n(w, key, key_len);
        jw_null(w);
        return;
    }
    char text[ID_STR_MAX];
    id_format(id, prefix, text);
    member_quoted(w, key, key_len, text, strlen(text));
}

void jw_member_time_n(jsonw *w, const char *key, size_t key_len, int64_t unix_us)
{
    char text[RFC3339_STR_MAX];
    format_rfc3339_ms(unix_us, text);
    member_quoted(w, key, key_len, text, strlen(text));
}

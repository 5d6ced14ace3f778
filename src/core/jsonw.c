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

void jwp_grow(jsonw *w, size_t more)
{
    size_t cap = w->cap ? w->cap : 4096; /* a list page of 20 payments is ~9 KiB */
    while (cap < w->len + more + 1)
        cap *= 2;
    char *grown = realloc(w->buf, cap);
    if (!grown)
        abort(); /* out of memory: nothing sensible to answer */
    w->buf = grown;
    w->cap = cap;
}

/* Room for `more` bytes and the NUL after them. */
static inline void reserve(jsonw *w, size_t more)
{
    if (w->len + more + 1 > w->cap)
        jwp_grow(w, more);
}

/* Ends what was written up to o (reserved before): its length, and the NUL. */
static inline void written_to(jsonw *w, char *o)
{
    *o = '\0';
    w->len = (size_t)(o - w->buf);
}

static void put(jsonw *w, const char *s, size_t n)
{
    reserve(w, n);
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

/* Room for a value of `more` bytes at the current depth, after its comma (none before the first,
 * none after a key): where it goes. written_to ends it. */
static inline char *value_at(jsonw *w, size_t more)
{
    reserve(w, more + 1);
    char *o = w->buf + w->len;
    if (w->after_key) {
        w->after_key = false;
        return o;
    }
    if (!w->first[w->depth])
        *o++ = ',';
    w->first[w->depth] = false;
    return o;
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
    char *o = value_at(w, 1);
    *o++ = c;
    written_to(w, o);
    if (w->depth + 1 < JSONW_MAX_DEPTH)
        w->depth++;
    w->first[w->depth] = true;
}

static void close_nested(jsonw *w, char c)
{
    if (w->depth > 0)
        w->depth--;
    reserve(w, 1);
    w->buf[w->len++] = c;
    w->buf[w->len] = '\0';
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

/* Whether none of the 8 bytes of x needs care in a JSON string: each is printable ASCII other
 * than '"' and '\\' (bit tricks on the whole word; a borrow only ever marks a byte above one
 * that is marked already, so the answer for the word is exact). */
static inline bool plain_word(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
    uint64_t quote = x ^ (ones * '"'), backslash = x ^ (ones * '\\');
    uint64_t below_space = (x - ones * 0x20) & ~x;
    uint64_t is_quote = (quote - ones) & ~quote, is_backslash = (backslash - ones) & ~backslash;
    return !((below_space | is_quote | is_backslash | x) & high);
}

static inline bool plain_byte(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The rest of a string from its first byte that needs care (p: NUL-terminated), escaped. */
static char *escape_rest(char *o, const unsigned char *p)
{
    for (; *p; p++) {
        /* the common case, a run of printable ASCII that needs no escape, is copied at once */
        const unsigned char *run = p;
        while (plain_byte(*p))
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
    return o;
}

/* Ids, codes and enums need no escape: 8 bytes at a time tell. */
char *jwp_put_string(char *o, const char *s, size_t n)
{
    *o++ = '"';
    size_t plain = 0;
    if (n < 8) {
        while (plain < n && plain_byte((unsigned char)s[plain])) {
            o[plain] = s[plain];
            plain++;
        }
    } else {
        uint64_t x;
        for (; plain + 8 <= n; plain += 8) {
            memcpy(&x, s + plain, 8);
            if (!plain_word(x))
                break;
            memcpy(o + plain, &x, 8);
        }
        if (plain + 8 > n) { /* the bytes after the last whole word: the 8 that end the string */
            memcpy(&x, s + n - 8, 8);
            if (plain_word(x)) {
                memcpy(o + n - 8, &x, 8);
                plain = n;
            }
        }
    }
    o += plain;
    if (plain < n)
        o = escape_rest(o, (const unsigned char *)s + plain);
    *o++ = '"';
    return o;
}

void jw_string(jsonw *w, const char *s)
{
    if (!s) {
        jw_null(w);
        return;
    }
    size_t n = strlen(s);
    written_to(w, jwp_put_string(value_at(w, n * 6 + 2), s, n));
}

void jw_int(jsonw *w, int64_t v)
{
    written_to(w, decimal_put(value_at(w, DECIMAL_CHARS), v));
}

void jw_bool(jsonw *w, bool v)
{
    char *o = value_at(w, 5);
    if (v) {
        memcpy(o, "true", 4);
        o += 4;
    } else {
        memcpy(o, "false", 5);
        o += 5;
    }
    written_to(w, o);
}

void jw_null(jsonw *w)
{
    char *o = value_at(w, 4);
    memcpy(o, "null", 4);
    written_to(w, o + 4);
}

void jw_raw(jsonw *w, const char *json, const char *fallback)
{
    const char *text = json ? json : fallback;
    size_t n = strlen(text);
    char *o = value_at(w, n);
    memcpy(o, text, n);
    written_to(w, o + n);
}

char *jwp_put_id(char *o, const char *prefix, size_t prefix_len, uint64_t id)
{
    _Static_assert(JW_ID_CHARS == ID_STR_MAX - 1 + 2, "an id and its quotes");
    *o++ = '"';
    if (prefix_len >= 1 && prefix_len <= ID_PREFIX_MAX) { /* else "", as id_format */
        memcpy(o, prefix, prefix_len);
        o += prefix_len;
        *o++ = '_';
        o = id_digits(id, o);
    }
    *o++ = '"';
    return o;
}

char *jwp_put_time(char *o, int64_t unix_us)
{
    _Static_assert(JW_TIME_CHARS == RFC3339_MS_LEN + 2, "a time and its quotes");
    *o++ = '"';
    format_rfc3339_ms(unix_us, o);
    o += RFC3339_MS_LEN;
    *o++ = '"';
    return o;
}

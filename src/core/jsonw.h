#ifndef PAYD_CORE_JSONW_H
#define PAYD_CORE_JSONW_H
/* A JSON writer straight into one growing buffer, for the hot responses (payments, lists):
 * building a jansson tree of every row and then dumping it costs most of a list request's CPU.
 * Commas are placed by the writer; the caller only says what comes next. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/decimal.h"

#define JSONW_MAX_DEPTH 16

/* Inline even where the compiler would rather call: what makes a literal key a few moves. */
#define JW_INLINE static inline __attribute__((always_inline))

typedef struct jsonw {
    char *buf;
    size_t len, cap;
    int depth;
    bool first[JSONW_MAX_DEPTH]; /* nothing written yet at this depth */
    bool after_key;
    signed char livemode; /* the mode every object written says (docs/modes.md); -1: none */
} jsonw;

void jw_init(jsonw *w);
/* A writer whose objects say their mode: live true or false (jw_member_object). */
void jw_init_mode(jsonw *w, bool live);
void jw_free(jsonw *w);
/* Hands the text over (NUL-terminated, malloc'd) and resets the writer. */
char *jw_take(jsonw *w, size_t *len);

void jw_object_begin(jsonw *w);
void jw_object_end(jsonw *w);
/* Takes back the closing brace of the object just written, so members can follow its own: a
 * resource's row, and a member that only its creation shows (a new key's secret). */
void jw_object_reopen(jsonw *w);
void jw_array_begin(jsonw *w);
void jw_array_end(jsonw *w);
/* Keys must need no escaping. A key is a literal in every writer payd has: the functions taking
 * one are inline (below), so its length is known where it is written and its bytes are copied
 * by a few moves, not a call (a list page writes some 400 keys). */
JW_INLINE void jw_key(jsonw *w, const char *key);

void jw_string(jsonw *w, const char *s); /* NULL writes null */
void jw_int(jsonw *w, int64_t v);
void jw_bool(jsonw *w, bool v);
void jw_null(jsonw *w);
/* Ends a top-level value with a newline; the next one starts a line of its own (JSON Lines). */
void jw_end_line(jsonw *w);
/* Already serialized JSON (a stored metadata object, say); NULL writes fallback. */
void jw_raw(jsonw *w, const char *json, const char *fallback);

/* An object's "object" member, its type, and then its "livemode" when the writer has a mode
 * (jw_init_mode): the one place a resource's object says its mode (docs/modes.md). The type is
 * a literal that needs no escaping, as a key. */
JW_INLINE void jw_member_object(jsonw *w, const char *type);

/* Object members as payd's contract writes them, for the writers of resource rows (inline,
 * below): */
/* s NULL writes null */
JW_INLINE void jw_member_string(jsonw *w, const char *key, const char *s);
JW_INLINE void jw_member_int(jsonw *w, const char *key, int64_t v);
/* An id as "<prefix>_<13 chars>"; 0 (no id) writes null. */
JW_INLINE void jw_member_id(jsonw *w, const char *key, const char *prefix, uint64_t id);
/* A time (µs) in RFC 3339 with milliseconds. */
JW_INLINE void jw_member_time(jsonw *w, const char *key, int64_t unix_us);
JW_INLINE void jw_member_null(jsonw *w, const char *key);

/* ---- What the inline functions are made of (jsonw.c; an integer is decimal_put's, core/
 * decimal.h); nothing else calls these. Each put writes at o, which has room for what it says,
 * and returns the end. ---- */

#define JW_ID_CHARS   25 /* "<prefix>_<13 chars>", quoted (ID_STR_MAX - 1 + 2) */
#define JW_TIME_CHARS 26 /* "2026-10-12T08:31:07.123Z", quoted */

/* Grows the buffer for `more` bytes and the NUL after them. */
void jwp_grow(jsonw *w, size_t more);
/* s (n bytes, NUL-terminated) quoted and escaped: room for n * 6 + 2 (every byte as \u00XX). */
char *jwp_put_string(char *o, const char *s, size_t n);
/* "<prefix>_<13 chars>" (prefix: prefix_len bytes), quoted. */
char *jwp_put_id(char *o, const char *prefix, size_t prefix_len, uint64_t id);
/* RFC 3339 with milliseconds, quoted. */
char *jwp_put_time(char *o, int64_t unix_us);

/* A member's key (n bytes) with its comma, and room for `value` more bytes and a NUL after it:
 * returns where the value goes (jwp_end ends it). */
JW_INLINE char *jwp_member(jsonw *w, const char *key, size_t n, size_t value)
{
    if (w->len + n + 4 + value + 1 > w->cap)
        jwp_grow(w, n + 4 + value);
    char *o = w->buf + w->len;
    if (!w->first[w->depth])
        *o++ = ',';
    w->first[w->depth] = false;
    *o++ = '"';
    memcpy(o, key, n);
    o += n;
    *o++ = '"';
    *o++ = ':';
    return o;
}

JW_INLINE void jwp_end(jsonw *w, char *o)
{
    *o = '\0';
    w->len = (size_t)(o - w->buf);
}

JW_INLINE void jw_key(jsonw *w, const char *key)
{
    jwp_end(w, jwp_member(w, key, strlen(key), 0));
    w->after_key = true; /* the value writers put no comma after it */
}

JW_INLINE void jw_member_object(jsonw *w, const char *type)
{
    static const char live[] = ",\"livemode\":true", test[] = ",\"livemode\":false";
    size_t n = strlen(type);
    char *o = jwp_member(w, "object", 6, n + 2 + sizeof test - 1);
    *o++ = '"';
    memcpy(o, type, n);
    o += n;
    *o++ = '"';
    if (w->livemode > 0) {
        memcpy(o, live, sizeof live - 1);
        o += sizeof live - 1;
    } else if (w->livemode == 0) {
        memcpy(o, test, sizeof test - 1);
        o += sizeof test - 1;
    }
    jwp_end(w, o);
}

JW_INLINE void jw_member_null(jsonw *w, const char *key)
{
    char *o = jwp_member(w, key, strlen(key), 4);
    memcpy(o, "null", 4);
    jwp_end(w, o + 4);
}

JW_INLINE void jw_member_string(jsonw *w, const char *key, const char *s)
{
    if (!s) {
        jw_member_null(w, key);
        return;
    }
    size_t n = strlen(s);
    jwp_end(w, jwp_put_string(jwp_member(w, key, strlen(key), n * 6 + 2), s, n));
}

JW_INLINE void jw_member_int(jsonw *w, const char *key, int64_t v)
{
    jwp_end(w, decimal_put(jwp_member(w, key, strlen(key), DECIMAL_CHARS), v));
}

JW_INLINE void jw_member_id(jsonw *w, const char *key, const char *prefix, uint64_t id)
{
    if (!id) {
        jw_member_null(w, key);
        return;
    }
    jwp_end(w, jwp_put_id(jwp_member(w, key, strlen(key), JW_ID_CHARS), prefix,
                          prefix ? strlen(prefix) : 0, id));
}

JW_INLINE void jw_member_time(jsonw *w, const char *key, int64_t unix_us)
{
    jwp_end(w, jwp_put_time(jwp_member(w, key, strlen(key), JW_TIME_CHARS), unix_us));
}

#endif

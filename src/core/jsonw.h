#ifndef PAYD_CORE_JSONW_H
#define PAYD_CORE_JSONW_H
/* A JSON writer straight into one growing buffer, for the hot responses (payments, lists):
 * building a jansson tree of every row and then dumping it costs most of a list request's CPU.
 * Commas are placed by the writer; the caller only says what comes next. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define JSONW_MAX_DEPTH 16

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
/* Keys must need no escaping. The functions taking a key are inline wrappers that pass its
 * length, so a literal key (every key payd writes) costs no strlen per row. */
void jw_key_n(jsonw *w, const char *key, size_t key_len);
static inline void jw_key(jsonw *w, const char *key)
{
    jw_key_n(w, key, strlen(key));
}

void jw_string(jsonw *w, const char *s); /* NULL writes null */
void jw_int(jsonw *w, int64_t v);
void jw_bool(jsonw *w, bool v);
void jw_null(jsonw *w);
/* Ends a top-level value with a newline; the next one starts a line of its own (JSON Lines). */
void jw_end_line(jsonw *w);
/* Already serialized JSON (a stored metadata object, say); NULL writes fallback. */
void jw_raw(jsonw *w, const char *json, const char *fallback);

/* Object members as payd's contract writes them, for the writers of resource rows. */
void jw_member_string_n(jsonw *w, const char *key, size_t key_len, const char *s);
void jw_member_int_n(jsonw *w, const char *key, size_t key_len, int64_t v);
void jw_member_id_n(jsonw *w, const char *key, size_t key_len, const char *prefix, uint64_t id);
void jw_member_time_n(jsonw *w, const char *key, size_t key_len, int64_t unix_us);

/* An object's "object" member, its type, and then its "livemode" when the writer has a mode
 * (jw_init_mode): the one place a resource's object says its mode (docs/modes.md). */
void jw_member_object(jsonw *w, const char *type);

/* s NULL writes null */
static inline void jw_member_string(jsonw *w, const char *key, const char *s)
{
    jw_member_string_n(w, key, strlen(key), s);
}
static inline void jw_member_int(jsonw *w, const char *key, int64_t v)
{
    jw_member_int_n(w, key, strlen(key), v);
}
/* An id as "<prefix>_<13 chars>"; 0 (no id) writes null. */
static inline void jw_member_id(jsonw *w, const char *key, const char *prefix, uint64_t id)
{
    jw_member_id_n(w, key, strlen(key), prefix, id);
}
/* A time (µs) in RFC 3339 with milliseconds. */
static inline void jw_member_time(jsonw *w, const char *key, int64_t unix_us)
{
    jw_member_time_n(w, key, strlen(key), unix_us);
}

#endif

/* Signed opaque pagination cursors (§4): a position (created_at, id), a direction and a scope
 * that binds the cursor to its list, parent, user and filters, under HMAC-SHA256. */
#ifndef PAYD_CORE_CURSOR_H
#define PAYD_CORE_CURSOR_H

#include <stddef.h>
#include <stdint.h>

enum { CURSOR_NEXT = 1 /* older items */, CURSOR_PREV = 2 /* newer items */ };

typedef struct {
    uint8_t direction;
    int64_t created_at; /* µs since the Unix epoch */
    uint64_t id;
    uint8_t scope[16]; /* binds list, parent id, user and filters: see cursor_scope */
} page_cursor;

#define CURSOR_STR_MAX 128

/* scope = first 16 bytes of SHA-256 over the parts, each followed by a NUL byte.
 * Pass "" for an absent filter (a NULL part counts as ""). */
void cursor_scope(const char *const parts[], size_t n, uint8_t out[16]);

/* 0 ok; -1 for an unknown direction or an empty key */
int cursor_encode(const uint8_t *key, size_t key_len, const page_cursor *c,
                  char out[CURSOR_STR_MAX]);

/* 0 ok; -1 for anything malformed or not signed by key (compare the MAC with CRYPTO_memcmp,
 * constant time). The caller then compares out->scope with the request's own to tell
 * cursor_mismatch. */
int cursor_decode(const uint8_t *key, size_t key_len, const char *s, page_cursor *out);

/* No padding; writes a NUL-terminated string; returns its length, or 0 if cap (which counts the
 * NUL) is too small. Empty input gives "" and 0. */
size_t base64url_encode(const uint8_t *in, size_t len, char *out, size_t cap);

/* Strict: rejects padding, non-alphabet chars, impossible lengths and non-zero unused bits in the
 * last char (so each byte string has exactly one encoding). 0 ok / -1 (also if cap is too small).
 */
int base64url_decode(const char *in, uint8_t *out, size_t cap, size_t *out_len);

#endif

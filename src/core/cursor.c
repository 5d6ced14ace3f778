/* Cursor codec. Wire format, 50 bytes, then base64url without padding (67 chars):
 *   version (1) | direction (1) | created_at (8, BE) | id (8, BE) | scope (16) | MAC (16)
 * where MAC is HMAC-SHA256 under the server secret over everything before it, truncated. */
#include "core/cursor.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/canonical.h"

#define CURSOR_VERSION 1
#define MAC_LEN        16
#define BODY_LEN       (1 + 1 + 8 + 8 + 16)
#define WIRE_LEN       (BODY_LEN + MAC_LEN)

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void cursor_scope(const char *const parts[], size_t n, uint8_t out[16])
{
    /* Each part keeps its NUL, so {"ab","c"} and {"a","bc"} hash differently. */
    uint8_t digest[32];
    sha256_stream *st = sha256_begin();
    for (size_t i = 0; i < n; i++) {
        const char *part = parts[i] ? parts[i] : "";
        sha256_add(st, part, strlen(part) + 1);
    }
    sha256_end(st, digest);
    memcpy(out, digest, 16);
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* HMAC-SHA256 (RFC 2104) on the core's digest. OpenSSL's one-shot HMAC() fetches and sets up a
 * MAC object on every call: a twentieth of a list page's CPU for its one cursor. */
#define HMAC_BLOCK 64

/* The stream after one block of the key XOR pad: HMAC's inner (0x36) or outer (0x5c) start. */
static sha256_stream *keyed_block(const uint8_t key[HMAC_BLOCK], uint8_t pad)
{
    uint8_t block[HMAC_BLOCK];
    for (int i = 0; i < HMAC_BLOCK; i++)
        block[i] = key[i] ^ pad;
    sha256_stream *st = sha256_begin();
    sha256_add(st, block, sizeof block);
    OPENSSL_cleanse(block, sizeof block);
    return st;
}

/* A key's two keyed blocks, hashed. */
typedef struct keyed_hmac {
    uint8_t key[HMAC_BLOCK];
    size_t key_len; /* 0: a long key, hashed first (never kept) */
    sha256_stream *inner, *outer;
} keyed_hmac;

static keyed_hmac *keyed_new(const uint8_t *key, size_t key_len)
{
    keyed_hmac *k = calloc(1, sizeof *k);
    if (!k)
        abort();
    uint8_t block_key[HMAC_BLOCK] = {0};
    if (key_len > HMAC_BLOCK) { /* a long key is hashed first */
        sha256_stream *st = sha256_begin();
        sha256_add(st, key, key_len);
        sha256_end(st, block_key);
    } else {
        memcpy(block_key, key, key_len);
        memcpy(k->key, key, key_len);
        k->key_len = key_len;
    }
    k->inner = keyed_block(block_key, 0x36);
    k->outer = keyed_block(block_key, 0x5c);
    OPENSSL_cleanse(block_key, sizeof block_key);
    return k;
}

static void keyed_free(keyed_hmac *k)
{
    uint8_t ignored[32];
    sha256_end(k->inner, ignored);
    sha256_end(k->outer, ignored);
    OPENSSL_cleanse(k, sizeof *k);
    free(k);
}

/* The keyed blocks of the first key the process signs with, hashed once and kept: a node signs
 * every cursor with its one key, and hashing the two blocks was half of a list page's HMAC. Any
 * other key (tests) has its blocks hashed for each use. */
static _Atomic(keyed_hmac *) first_key;

static int mac(const uint8_t *key, size_t key_len, const uint8_t body[BODY_LEN],
               uint8_t out[MAC_LEN])
{
    if (key == NULL || key_len == 0)
        return -1;
    keyed_hmac *k = atomic_load(&first_key), *own = NULL;
    if (!k && key_len <= HMAC_BLOCK) {
        keyed_hmac *made = keyed_new(key, key_len), *none = NULL;
        if (atomic_compare_exchange_strong(&first_key, &none, made)) {
            k = made;
        } else {
            keyed_free(made);
            k = none; /* another thread's, kept first */
        }
    }
    if (!k || k->key_len != key_len || CRYPTO_memcmp(k->key, key, key_len) != 0)
        k = own = keyed_new(key, key_len);
    uint8_t inner[32], full[32];
    sha256_stream *st = sha256_copy(k->inner);
    sha256_add(st, body, BODY_LEN);
    sha256_end(st, inner);
    st = sha256_copy(k->outer);
    sha256_add(st, inner, sizeof inner);
    sha256_end(st, full);
    if (own)
        keyed_free(own);
    memcpy(out, full, MAC_LEN);
    return 0;
}

static int valid_direction(uint8_t d)
{
    return d == CURSOR_NEXT || d == CURSOR_PREV;
}

int cursor_encode(const uint8_t *key, size_t key_len, const page_cursor *c,
                  char out[CURSOR_STR_MAX])
{
    uint8_t wire[WIRE_LEN];
    if (!valid_direction(c->direction))
        return -1;
    wire[0] = CURSOR_VERSION;
    wire[1] = c->direction;
    put_be64(wire + 2, (uint64_t)c->created_at);
    put_be64(wire + 10, c->id);
    memcpy(wire + 18, c->scope, 16);
    if (mac(key, key_len, wire, wire + BODY_LEN) != 0)
        return -1;
    return base64url_encode(wire, WIRE_LEN, out, CURSOR_STR_MAX) > 0 ? 0 : -1;
}

int cursor_decode(const uint8_t *key, size_t key_len, const char *s, page_cursor *out)
{
    uint8_t wire[WIRE_LEN], expected[MAC_LEN];
    size_t len;
    if (s == NULL || base64url_decode(s, wire, sizeof wire, &len) != 0 || len != WIRE_LEN)
        return -1;
    /* Check the MAC before looking at any field, so nothing unsigned is ever interpreted. */
    if (mac(key, key_len, wire, expected) != 0 ||
        CRYPTO_memcmp(expected, wire + BODY_LEN, MAC_LEN) != 0)
        return -1;
    if (wire[0] != CURSOR_VERSION || !valid_direction(wire[1]))
        return -1;
    out->direction = wire[1];
    out->created_at = (int64_t)get_be64(wire + 2);
    out->id = get_be64(wire + 10);
    memcpy(out->scope, wire + 18, 16);
    return 0;
}

size_t base64url_encode(const uint8_t *in, size_t len, char *out, size_t cap)
{
    size_t need = len / 3 * 4 + (len % 3 ? len % 3 + 1 : 0);
    if (cap < need + 1)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        size_t chars = len - i >= 3 ? 4 : len - i + 1;
        for (size_t k = 0; k < chars; k++)
            out[o++] = B64URL[v >> (18 - 6 * k) & 63];
    }
    out[o] = '\0';
    return o;
}

static int b64url_value(char c)
{
    const char *hit = c ? strchr(B64URL, c) : NULL;
    return hit ? (int)(hit - B64URL) : -1;
}

int base64url_decode(const char *in, uint8_t *out, size_t cap, size_t *out_len)
{
    if (in == NULL)
        return -1;
    size_t n = strlen(in);
    size_t rem = n % 4;
    size_t need = n / 4 * 3 + (rem ? rem - 1 : 0);
    if (rem == 1 || need > cap) /* one char carries only 6 bits: no byte ends there */
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n; i += 4) {
        size_t chars = n - i >= 4 ? 4 : n - i;
        uint32_t v = 0;
        for (size_t k = 0; k < 4; k++) {
            int d = k < chars ? b64url_value(in[i + k]) : 0;
            if (d < 0)
                return -1;
            v = v << 6 | (uint32_t)d;
        }
        size_t bytes = chars - 1;
        /* Bits below the last whole byte must be zero, or two strings would decode alike. */
        if (v & ((1u << (8 * (3 - bytes))) - 1))
            return -1;
        for (size_t k = 0; k < bytes; k++)
            out[o++] = (uint8_t)(v >> (16 - 8 * k));
    }
    *out_len = o;
    return 0;
}

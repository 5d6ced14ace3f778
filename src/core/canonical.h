/* Canonical JSON and request fingerprints for idempotency keys (§2): reordering keys or adding
 * white space must not change a request's fingerprint. */
#ifndef PAYD_CORE_CANONICAL_H
#define PAYD_CORE_CANONICAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* malloc'd compact JSON with object keys sorted at every depth; NULL on error */
char *json_canonical(const json_t *v);

void sha256_hex(const void *data, size_t len, char out[65]);

/* SHA-256 over method, NUL, path, NUL, canonical body (body may be NULL = empty), as lowercase hex
 */
void request_fingerprint(const char *method, const char *path, const char *canonical_body,
                         char out[65]);

/* Incremental SHA-256, the one digest routine of the core. These abort if libcrypto fails, since
 * no value they could return would be safe (see canonical.c). */
typedef struct sha256_stream sha256_stream;
sha256_stream *sha256_begin(void);
void sha256_add(sha256_stream *st, const void *data, size_t len);
void sha256_end(sha256_stream *st, uint8_t out[32]); /* frees st */
/* A new stream that goes on from where `from` is (which stays as it was): a prefix hashed once
 * for many messages, as HMAC's keyed block. */
sha256_stream *sha256_copy(const sha256_stream *from);

#endif

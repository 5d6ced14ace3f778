/* Canonical JSON and SHA-256 fingerprints. */
#include "core/canonical.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *json_canonical(const json_t *v)
{
    if (v == NULL)
        return NULL;
    /* jansson writes UTF-8 as is and escapes only what JSON requires, so with sorted keys and no
     * white space one value has exactly one text. ENCODE_ANY allows a bare scalar too. */
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

/* SHA-256 fails only when libcrypto cannot allocate or load its provider. Returning anything then
 * would be wrong: a fixed value would make two different requests (or cursor scopes) look alike,
 * so a replay could answer the wrong request. Stop instead. */
static void require(int ok)
{
    if (!ok) {
        fprintf(stderr, "payd: SHA-256 failed in libcrypto\n");
        abort();
    }
}

/* The algorithm is looked up in libcrypto's providers once: EVP_sha256() would be looked up
 * again on every digest, which cost more than hashing an API key (auth hashes one per request). */
static EVP_MD *sha256_md;

static void fetch_sha256(void)
{
    sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

sha256_stream *sha256_begin(void)
{
    static pthread_once_t fetched = PTHREAD_ONCE_INIT;
    pthread_once(&fetched, fetch_sha256);
    require(sha256_md != NULL);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    require(ctx != NULL && EVP_DigestInit_ex(ctx, sha256_md, NULL) == 1);
    return (sha256_stream *)ctx;
}

void sha256_add(sha256_stream *st, const void *data, size_t len)
{
    require(EVP_DigestUpdate((EVP_MD_CTX *)st, data, len) == 1);
}

sha256_stream *sha256_copy(const sha256_stream *from)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    require(ctx != NULL && EVP_MD_CTX_copy_ex(ctx, (const EVP_MD_CTX *)from) == 1);
    return (sha256_stream *)ctx;
}

void sha256_end(sha256_stream *st, uint8_t out[32])
{
    int ok = EVP_DigestFinal_ex((EVP_MD_CTX *)st, out, NULL) == 1;
    EVP_MD_CTX_free((EVP_MD_CTX *)st);
    require(ok);
}

static void to_hex(const uint8_t digest[32], char out[65])
{
    static const char HEX[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = HEX[digest[i] >> 4];
        out[2 * i + 1] = HEX[digest[i] & 15];
    }
    out[64] = '\0';
}

void sha256_hex(const void *data, size_t len, char out[65])
{
    uint8_t digest[32];
    sha256_stream *st = sha256_begin();
    sha256_add(st, data, len);
    sha256_end(st, digest);
    to_hex(digest, out);
}

void request_fingerprint(const char *method, const char *path, const char *canonical_body,
                         char out[65])
{
    /* The NULs keep the parts apart: path "/v1/a" with body "b..." cannot pass for path "/v1/ab".
     */
    uint8_t digest[32];
    sha256_stream *st = sha256_begin();
    sha256_add(st, method, strlen(method) + 1);
    sha256_add(st, path, strlen(path) + 1);
    if (canonical_body)
        sha256_add(st, canonical_body, strlen(canonical_body));
    sha256_end(st, digest);
    to_hex(digest, out);
}

/* Sealing secrets at rest with AES-256-GCM (seal.h). */
#include "core/seal.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

#include "core/cursor.h"

#define NONCE_BYTES 12
#define TAG_BYTES   16
#define PLAIN_MAX   1024 /* secrets are short; a bound keeps the buffers on the stack */

void seal_key_derive(const uint8_t server_secret[32], const char *purpose,
                     uint8_t key[SEAL_KEY_BYTES])
{
    /* T(1) = HMAC(PRK, info | 0x01): one block is the whole 32-byte key */
    uint8_t info[128];
    size_t len = strlen(purpose);
    if (len > sizeof info - 1)
        len = sizeof info - 1;
    memcpy(info, purpose, len);
    info[len] = 0x01;
    unsigned int out_len = 0;
    HMAC(EVP_sha256(), server_secret, 32, info, len + 1, key, &out_len);
}

size_t seal_text_size(size_t plain_len)
{
    size_t raw = NONCE_BYTES + plain_len + TAG_BYTES;
    return strlen(SEAL_PREFIX) + (raw + 2) / 3 * 4 + 1;
}

bool seal_is_sealed(const char *text)
{
    return text && !strncmp(text, SEAL_PREFIX, strlen(SEAL_PREFIX));
}

/* One AES-256-GCM pass: encrypts (seal) or decrypts and checks the tag (open). */
static int gcm(bool seal, const uint8_t key[SEAL_KEY_BYTES], const uint8_t nonce[NONCE_BYTES],
               const char *context, const uint8_t *in, int in_len, uint8_t *out, uint8_t *tag)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int len = 0, ok = ctx != NULL;
    ok = ok && EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce, seal) == 1;
    ok = ok &&
         EVP_CipherUpdate(ctx, NULL, &len, (const uint8_t *)context, (int)strlen(context)) == 1;
    ok = ok && EVP_CipherUpdate(ctx, out, &len, in, in_len) == 1;
    if (!seal)
        ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, TAG_BYTES, tag) == 1;
    ok = ok && EVP_CipherFinal_ex(ctx, out + len, &len) == 1; /* open: fails on a wrong tag */
    if (seal)
        ok = ok && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, TAG_BYTES, tag) == 1;
    EVP_CIPHER_CTX_free(ctx);
    return ok ? 0 : -1;
}

int seal_text(const uint8_t key[SEAL_KEY_BYTES], const char *context, const char *plain, char *out,
              size_t cap)
{
    size_t plain_len = strlen(plain);
    if (plain_len > PLAIN_MAX || cap < seal_text_size(plain_len))
        return -1;
    uint8_t raw[NONCE_BYTES + PLAIN_MAX + TAG_BYTES];
    uint8_t *nonce = raw, *cipher = raw + NONCE_BYTES, *tag = cipher + plain_len;
    if (RAND_bytes(nonce, NONCE_BYTES) != 1 ||
        gcm(true, key, nonce, context, (const uint8_t *)plain, (int)plain_len, cipher, tag) != 0)
        return -1;
    size_t prefix = strlen(SEAL_PREFIX);
    memcpy(out, SEAL_PREFIX, prefix);
    size_t raw_len = NONCE_BYTES + plain_len + TAG_BYTES;
    return base64url_encode(raw, raw_len, out + prefix, cap - prefix) > 0 ? 0 : -1;
}

int seal_open(const uint8_t key[SEAL_KEY_BYTES], const char *context, const char *sealed, char *out,
              size_t cap)
{
    uint8_t raw[NONCE_BYTES + PLAIN_MAX + TAG_BYTES];
    size_t raw_len = 0;
    if (!seal_is_sealed(sealed) ||
        base64url_decode(sealed + strlen(SEAL_PREFIX), raw, sizeof raw, &raw_len) != 0 ||
        raw_len < NONCE_BYTES + TAG_BYTES)
        return -1;
    size_t plain_len = raw_len - NONCE_BYTES - TAG_BYTES;
    if (cap < plain_len + 1)
        return -1;
    uint8_t *cipher = raw + NONCE_BYTES;
    if (gcm(false, key, raw, context, cipher, (int)plain_len, (uint8_t *)out, cipher + plain_len) !=
        0)
        return -1;
    out[plain_len] = '\0';
    return 0;
}

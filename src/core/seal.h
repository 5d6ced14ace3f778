#ifndef PAYD_CORE_SEAL_H
#define PAYD_CORE_SEAL_H
/* Secrets at rest (docs/webhooks.md, "Secrets at rest"): a short text sealed with AES-256-GCM
 * under a key derived from the server secret, so a database row never holds it in the clear.
 *
 *   sealed:v1:<base64url(nonce (12) | ciphertext | tag (16))>
 *
 * The nonce is random per seal. The context (for example "webhook_endpoint:123") is bound as
 * additional data: a sealed text copied to another row does not open there. The version in the
 * prefix names the key derivation and the cipher, so either can change without a flag day. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SEAL_PREFIX    "sealed:v1:"
#define SEAL_KEY_BYTES 32

/* The key for one purpose ("webhook secrets v1"): HKDF-SHA256's expand step (RFC 5869 §2.3)
 * with the 32 random bytes of the server secret as its pseudorandom key, so each purpose gets a
 * key of its own and none of them is the secret that signs cursors. */
void seal_key_derive(const uint8_t server_secret[32], const char *purpose,
                     uint8_t key[SEAL_KEY_BYTES]);

/* The bytes a sealed plain text of plain_len bytes takes, with its NUL. */
size_t seal_text_size(size_t plain_len);

/* Seals plain into out (cap bytes, at least seal_text_size(strlen(plain))): 0, or -1 when cap is
 * short or OpenSSL fails (no randomness). */
int seal_text(const uint8_t key[SEAL_KEY_BYTES], const char *context, const char *plain, char *out,
              size_t cap);

/* True when text is a sealed text (it starts with SEAL_PREFIX). */
bool seal_is_sealed(const char *text);

/* Opens a sealed text into out (cap bytes, NUL-terminated): 0, or -1 when it is malformed, was
 * sealed under another key or context, was altered, or does not fit. */
int seal_open(const uint8_t key[SEAL_KEY_BYTES], const char *context, const char *sealed, char *out,
              size_t cap);

#endif

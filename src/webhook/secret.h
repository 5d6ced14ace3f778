#ifndef PAYD_WEBHOOK_SECRET_H
#define PAYD_WEBHOOK_SECRET_H
/* A webhook endpoint's signing secret at rest (docs/webhooks.md, "Secrets at rest"): the row
 * holds it sealed (core/seal.h) under a key derived from the server secret, bound to the
 * endpoint's id; the create's answer shows it once, and a delivery opens it to sign. */
#include <stddef.h>
#include <stdint.h>

#define WEBHOOK_SECRET_MAX 80  /* "whsec_" and 44 base64 characters (48 hex before), with room */
#define WEBHOOK_SEALED_MAX 160 /* the same sealed (seal_text_size of 79 bytes is 150) */

/* A fresh secret: "whsec_" and the standard base64 of 32 random bytes, the Standard Webhooks
 * form (webhook/signature.h). Secrets made before were "whsec_" and 24 random bytes in hex; they
 * sign as they are. 0, or -1 without randomness. */
int webhook_secret_new(char out[WEBHOOK_SECRET_MAX]);
/* The secret of endpoint `endpoint_id` sealed for its row. 0, or -1. */
int webhook_secret_seal(const uint8_t server_secret[32], uint64_t endpoint_id, const char *secret,
                        char out[WEBHOOK_SEALED_MAX]);
/* What the row holds (malloc'd; taken and freed) back into the secret that signs (malloc'd): a
 * sealed secret opened, a plain one (a row sealed by no node yet: written before this release,
 * see webhook_secrets_seal_existing) as it is. NULL (logged) when it does not open. */
char *webhook_secret_opened(const uint8_t server_secret[32], uint64_t endpoint_id, char *stored);

#endif

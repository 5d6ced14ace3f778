/* Webhook signing secrets at rest (secret.h). */
#include "webhook/secret.h"

#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/seal.h"

/* the purpose the sealing key is derived for: another purpose gets another key */
#define SEALING_PURPOSE "payd webhook endpoint secrets v1"

int webhook_secret_new(char out[WEBHOOK_SECRET_MAX])
{
    uint8_t raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1)
        return -1;
    memcpy(out, "whsec_", 6);
    EVP_EncodeBlock((unsigned char *)out + 6, raw, sizeof raw); /* 44 characters and a NUL */
    return 0;
}

/* The additional data a secret is sealed with: its endpoint, so it opens in that row only. */
static void context_of(uint64_t endpoint_id, char out[48])
{
    snprintf(out, 48, "webhook_endpoint:%" PRIu64, endpoint_id);
}

int webhook_secret_seal(const uint8_t server_secret[32], uint64_t endpoint_id, const char *secret,
                        char out[WEBHOOK_SEALED_MAX])
{
    uint8_t key[SEAL_KEY_BYTES];
    char context[48];
    seal_key_derive(server_secret, SEALING_PURPOSE, key);
    context_of(endpoint_id, context);
    return seal_text(key, context, secret, out, WEBHOOK_SEALED_MAX);
}

char *webhook_secret_opened(const uint8_t server_secret[32], uint64_t endpoint_id, char *stored)
{
    if (!seal_is_sealed(stored))
        return stored;
    uint8_t key[SEAL_KEY_BYTES];
    char context[48], secret[WEBHOOK_SECRET_MAX];
    seal_key_derive(server_secret, SEALING_PURPOSE, key);
    context_of(endpoint_id, context);
    int rc = seal_open(key, context, stored, secret, sizeof secret);
    free(stored);
    if (rc == 0)
        return strdup(secret);
    /* sealed under another server secret, or altered: nothing can sign with it */
    jsonw w;
    log_begin(&w, "error", "webhook endpoint secret does not open");
    jw_key(&w, "endpoint_id");
    jw_int(&w, (int64_t)endpoint_id);
    log_end(&w);
    return NULL;
}

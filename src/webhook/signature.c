/* Webhook signatures: payd's and Standard Webhooks' (signature.h). */
#include "webhook/signature.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"

#define SECRET_PREFIX "whsec_"

int webhook_secret_key(const char *secret, uint8_t key[WEBHOOK_KEY_MAX])
{
    size_t prefix = strlen(SECRET_PREFIX);
    const char *text = strncmp(secret, SECRET_PREFIX, prefix) == 0 ? secret + prefix : secret;
    size_t len = strlen(text);
    /* at most WEBHOOK_KEY_MAX bytes once decoded, padding restored */
    char padded[WEBHOOK_KEY_MAX / 3 * 4 + 4];
    if (len == 0 || len % 4 == 1 || len + 3 >= sizeof padded)
        return -1;
    memcpy(padded, text, len);
    while (len % 4)
        padded[len++] = '=';
    padded[len] = '\0';
    uint8_t decoded[sizeof padded];
    int n = EVP_DecodeBlock(decoded, (const unsigned char *)padded, (int)len);
    if (n < 0)
        return -1;
    /* EVP_DecodeBlock counts each '=' as a zero byte */
    for (size_t i = len; i > 0 && padded[i - 1] == '='; i--)
        n--;
    if (n <= 0 || n > WEBHOOK_KEY_MAX)
        return -1;
    memcpy(key, decoded, (size_t)n);
    return n;
}

/* HMAC-SHA256(key, prefix | body) into mac (32 bytes). */
static void mac_of(const void *key, size_t key_len, const char *prefix, const char *body,
                   size_t body_len, uint8_t mac[32])
{
    size_t prefix_len = strlen(prefix);
    uint8_t *text = malloc(prefix_len + body_len + 1);
    memcpy(text, prefix, prefix_len);
    memcpy(text + prefix_len, body, body_len);
    unsigned mac_len = 0;
    HMAC(EVP_sha256(), key, (int)key_len, text, prefix_len + body_len, mac, &mac_len);
    free(text);
}

/* ",v1=<hex>" of one secret, appended at out + len. The new length. */
static size_t append_payd_mac(const char *secret, int64_t unix_s, const char *body, size_t body_len,
                              char *out, size_t len, size_t cap)
{
    /* the signed text is "<t>.<body>": the timestamp is signed too, so it cannot be moved */
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%lld.", (long long)unix_s);
    uint8_t mac[32];
    mac_of(secret, strlen(secret), prefix, body, body_len, mac);
    len += (size_t)snprintf(out + len, cap - len, ",v1=");
    for (size_t i = 0; i < sizeof mac && len + 2 < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%02x", mac[i]);
    return len;
}

void webhook_sign(const char *secret, int64_t unix_s, const char *body, size_t body_len, char *out,
                  size_t cap)
{
    size_t len = (size_t)snprintf(out, cap, "t=%lld", (long long)unix_s);
    append_payd_mac(secret, unix_s, body, body_len, out, len, cap);
}

int webhook_sign_standard(const char *secret, const char *msg_id, int64_t unix_s, const char *body,
                          size_t body_len, char *out, size_t cap)
{
    uint8_t key[WEBHOOK_KEY_MAX];
    int key_len = webhook_secret_key(secret, key);
    if (key_len < 0 || cap < 48)
        return -1;
    /* the id and the timestamp are signed too, so neither can be moved to another body */
    char prefix[160];
    int plen = snprintf(prefix, sizeof prefix, "%s.%lld.", msg_id, (long long)unix_s);
    if (plen < 0 || (size_t)plen >= sizeof prefix)
        return -1;
    uint8_t mac[32];
    mac_of(key, (size_t)key_len, prefix, body, body_len, mac);
    memcpy(out, "v1,", 3);
    EVP_EncodeBlock((unsigned char *)out + 3, mac, sizeof mac); /* 44 characters and a NUL */
    return 0;
}

int webhook_signature_headers(const char *secret, const char *previous, const char *msg_id,
                              int64_t unix_s, const char *body, size_t body_len,
                              char payd_out[WEBHOOK_PAYD_SIGNATURE_MAX],
                              char standard_out[WEBHOOK_STANDARD_SIGNATURE_MAX])
{
    webhook_sign(secret, unix_s, body, body_len, payd_out, WEBHOOK_PAYD_SIGNATURE_MAX);
    if (previous)
        append_payd_mac(previous, unix_s, body, body_len, payd_out, strlen(payd_out),
                        WEBHOOK_PAYD_SIGNATURE_MAX);
    if (webhook_sign_standard(secret, msg_id, unix_s, body, body_len, standard_out,
                              WEBHOOK_STANDARD_SIGNATURE_MAX) != 0)
        return -1;
    size_t len = strlen(standard_out);
    if (previous &&
        webhook_sign_standard(previous, msg_id, unix_s, body, body_len, standard_out + len + 1,
                              WEBHOOK_STANDARD_SIGNATURE_MAX - len - 1) == 0)
        standard_out[len] = ' '; /* the specification's separator between signatures */
    return 0;
}

struct curl_slist *webhook_delivery_headers(const char *secret, const char *previous,
                                            uint64_t event_id, int64_t unix_s, const char *body,
                                            size_t body_len)
{
    char id[ID_STR_MAX], payd[WEBHOOK_PAYD_SIGNATURE_MAX], standard[WEBHOOK_STANDARD_SIGNATURE_MAX],
        header[256];
    id_format(event_id, "evt", id);
    bool standard_signed = webhook_signature_headers(secret, previous, id, unix_s, body, body_len,
                                                     payd, standard) == 0;
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");
    snprintf(header, sizeof header, "Payd-Signature: %s", payd);
    headers = curl_slist_append(headers, header);
    snprintf(header, sizeof header, "Payd-Event-Id: %s", id);
    headers = curl_slist_append(headers, header);
    /* the Standard Webhooks three: the id, the time and the signature over both and the body */
    snprintf(header, sizeof header, "webhook-id: %s", id);
    headers = curl_slist_append(headers, header);
    snprintf(header, sizeof header, "webhook-timestamp: %lld", (long long)unix_s);
    headers = curl_slist_append(headers, header);
    if (standard_signed) {
        snprintf(header, sizeof header, "webhook-signature: %s", standard);
        headers = curl_slist_append(headers, header);
    }
    return curl_slist_append(headers, "User-Agent: payd-webhooks/1");
}

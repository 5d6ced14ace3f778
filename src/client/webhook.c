/* Webhook signatures (§15), the receiving side: the same HMAC payd computes, compared in
 * constant time, inside a tolerance window. */
#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "payd/client.h"

static int mac_of(const char *secret, int64_t unix_s, const char *body, size_t body_len,
                  unsigned char mac[32])
{
    char prefix[32];
    size_t plen = (size_t)snprintf(prefix, sizeof prefix, "%lld.", (long long)unix_s);
    unsigned char *text = malloc(plen + body_len + 1);
    if (!text)
        return -1;
    memcpy(text, prefix, plen);
    if (body_len)
        memcpy(text + plen, body, body_len);
    unsigned len = 0;
    bool ok = HMAC(EVP_sha256(), secret, (int)strlen(secret), text, plen + body_len, mac, &len) &&
              len == 32;
    free(text);
    return ok ? 0 : -1;
}

int payd_webhook_sign(const char *secret, int64_t unix_s, const char *body, size_t body_len,
                      char *out, size_t cap)
{
    unsigned char mac[32];
    if (!secret || !out || cap < 96 || mac_of(secret, unix_s, body ? body : "", body_len, mac))
        return -1;
    int len = snprintf(out, cap, "t=%lld,v1=", (long long)unix_s);
    for (int i = 0; i < 32; i++)
        len += snprintf(out + len, cap - (size_t)len, "%02x", mac[i]);
    return 0;
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

payd_webhook_check payd_webhook_verify(const char *secret, const char *signature_header,
                                       const char *body, size_t body_len, int64_t tolerance_s,
                                       int64_t now_s)
{
    if (!secret || !signature_header || (!body && body_len))
        return PAYD_WEBHOOK_MALFORMED;
    if (tolerance_s <= 0)
        tolerance_s = PAYD_WEBHOOK_TOLERANCE_S;
    if (now_s <= 0)
        now_s = (int64_t)time(NULL);
    /* the header is comma-separated key=value items: one t=, one or more v1= */
    int64_t t = -1;
    unsigned char candidates[8][32];
    int n = 0;
    const char *p = signature_header;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 2 && !strncmp(p, "t=", 2)) {
            char digits[24];
            if (len - 2 >= sizeof digits)
                return PAYD_WEBHOOK_MALFORMED;
            memcpy(digits, p + 2, len - 2);
            digits[len - 2] = '\0';
            char *stop;
            long long v = strtoll(digits, &stop, 10);
            if (*stop || v < 0)
                return PAYD_WEBHOOK_MALFORMED;
            t = v;
        } else if (len == 3 + 64 && !strncmp(p, "v1=", 3) && n < 8) {
            bool hex = true;
            for (int i = 0; i < 32 && hex; i++) {
                int hi = hex_value(p[3 + 2 * i]), lo = hex_value(p[4 + 2 * i]);
                hex = hi >= 0 && lo >= 0;
                candidates[n][i] = (unsigned char)(hi << 4 | lo);
            }
            n += hex;
        }
        p += len + (end != NULL);
    }
    if (t < 0 || n == 0)
        return PAYD_WEBHOOK_MALFORMED;
    unsigned char expected[32];
    if (mac_of(secret, t, body ? body : "", body_len, expected) != 0)
        return PAYD_WEBHOOK_MALFORMED;
    bool match = false;
    for (int i = 0; i < n; i++) /* every candidate compared in full: no early exit on content */
        match |= CRYPTO_memcmp(candidates[i], expected, 32) == 0;
    if (!match)
        return PAYD_WEBHOOK_BAD_SIGNATURE;
    if (t < now_s - tolerance_s || t > now_s + tolerance_s)
        return PAYD_WEBHOOK_TOO_OLD;
    return PAYD_WEBHOOK_OK;
}

const char *payd_webhook_check_name(payd_webhook_check check)
{
    switch (check) {
    case PAYD_WEBHOOK_OK:
        return "ok";
    case PAYD_WEBHOOK_MALFORMED:
        return "malformed";
    case PAYD_WEBHOOK_BAD_SIGNATURE:
        return "bad_signature";
    case PAYD_WEBHOOK_TOO_OLD:
        return "outside_tolerance";
    }
    return "unknown";
}

/* ---- Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature ---- */

static int base64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Standard base64 of len characters, its padding optional (a secret is often shown without
 * it); out holds at least len * 3 / 4 + 3 bytes. The decoded length, or -1. */
static long base64_decode(const char *in, size_t len, unsigned char *out)
{
    while (len && in[len - 1] == '=')
        len--;
    if (len % 4 == 1)
        return -1;
    long n = 0;
    unsigned bits = 0;
    int held = 0;
    for (size_t i = 0; i < len; i++) {
        int v = base64_value(in[i]);
        if (v < 0)
            return -1;
        bits = (bits << 6) | (unsigned)v;
        held += 6;
        if (held >= 8) {
            held -= 8;
            out[n++] = (unsigned char)(bits >> held);
            bits &= (1u << held) - 1;
        }
    }
    return n;
}

/* The key: the base64 decoding of the secret after an optional "whsec_". */
static unsigned char *standard_key(const char *secret, long *key_len)
{
    if (!strncmp(secret, "whsec_", 6))
        secret += 6;
    size_t len = strlen(secret);
    unsigned char *key = malloc(len * 3 / 4 + 3);
    if (key && (*key_len = base64_decode(secret, len, key)) <= 0) {
        free(key);
        key = NULL;
    }
    return key;
}

/* HMAC-SHA256(key, "<id>.<timestamp>.<body>"). */
static int standard_mac(const unsigned char *key, long key_len, const char *webhook_id,
                        const char *timestamp, const char *body, size_t body_len,
                        unsigned char mac[32])
{
    size_t id_len = strlen(webhook_id), ts_len = strlen(timestamp);
    size_t total = id_len + 1 + ts_len + 1 + body_len;
    unsigned char *text = malloc(total + 1);
    if (!text)
        return -1;
    memcpy(text, webhook_id, id_len);
    text[id_len] = '.';
    memcpy(text + id_len + 1, timestamp, ts_len);
    text[id_len + 1 + ts_len] = '.';
    if (body_len)
        memcpy(text + id_len + ts_len + 2, body, body_len);
    unsigned len = 0;
    bool ok = HMAC(EVP_sha256(), key, (int)key_len, text, total, mac, &len) && len == 32;
    free(text);
    return ok ? 0 : -1;
}

int payd_webhook_sign_standard(const char *secret, const char *webhook_id, int64_t unix_s,
                               const char *body, size_t body_len, char *out, size_t cap)
{
    if (!secret || !webhook_id || !out || cap < PAYD_WEBHOOK_STANDARD_SIGNATURE_MAX)
        return -1;
    long key_len;
    unsigned char *key = standard_key(secret, &key_len);
    if (!key)
        return -1;
    char timestamp[24];
    snprintf(timestamp, sizeof timestamp, "%lld", (long long)unix_s);
    unsigned char mac[32];
    int rc = standard_mac(key, key_len, webhook_id, timestamp, body ? body : "", body_len, mac);
    free(key);
    if (rc != 0)
        return -1;
    memcpy(out, "v1,", 3);
    EVP_EncodeBlock((unsigned char *)out + 3, mac, 32); /* 44 characters and a NUL */
    return 0;
}

/* The webhook-timestamp: decimal digits only. */
static bool parse_timestamp(const char *text, int64_t *out)
{
    if (!text || !*text || strlen(text) > 18)
        return false;
    int64_t v = 0;
    for (const char *p = text; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

/* Whether one of the space-separated "v1,<base64>" items is mac; every v1 item is compared in
 * full, in constant time, whatever the ones before it gave. */
static bool any_signature_matches(const char *header, const unsigned char mac[32])
{
    bool match = false;
    for (const char *p = header; *p;) {
        while (*p == ' ')
            p++;
        size_t len = strcspn(p, " ");
        if (len > 3 && !strncmp(p, "v1,", 3) && len - 3 <= 64) {
            unsigned char candidate[52];
            if (base64_decode(p + 3, len - 3, candidate) == 32)
                match |= CRYPTO_memcmp(candidate, mac, 32) == 0;
        }
        p += len;
    }
    return match;
}

payd_webhook_check payd_webhook_verify_standard(const char *secret, const char *webhook_id,
                                                const char *webhook_timestamp,
                                                const char *webhook_signature, const char *body,
                                                size_t body_len, int64_t now_s, int64_t tolerance_s)
{
    int64_t t;
    if (!secret || !webhook_id || !*webhook_id || !webhook_signature ||
        !parse_timestamp(webhook_timestamp, &t) || (!body && body_len))
        return PAYD_WEBHOOK_MALFORMED;
    if (tolerance_s <= 0)
        tolerance_s = PAYD_WEBHOOK_TOLERANCE_S;
    if (now_s <= 0)
        now_s = (int64_t)time(NULL);
    long key_len;
    unsigned char *key = standard_key(secret, &key_len);
    if (!key)
        return PAYD_WEBHOOK_MALFORMED;
    unsigned char mac[32];
    int rc =
        standard_mac(key, key_len, webhook_id, webhook_timestamp, body ? body : "", body_len, mac);
    OPENSSL_cleanse(key, (size_t)key_len);
    free(key);
    if (rc != 0)
        return PAYD_WEBHOOK_MALFORMED;
    if (!any_signature_matches(webhook_signature, mac))
        return PAYD_WEBHOOK_BAD_SIGNATURE;
    if (t < now_s - tolerance_s || t > now_s + tolerance_s)
        return PAYD_WEBHOOK_TOO_OLD;
    return PAYD_WEBHOOK_OK;
}

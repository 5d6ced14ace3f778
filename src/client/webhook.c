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

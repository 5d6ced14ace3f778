/* Numeric IP addresses: their one spelling, and the ranges of --trust-proxy (address.h). */
#include "http/address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An IPv4 address in dotted decimal, as inet_ntop writes it, without its sprintf (one runs for
 * every request). */
static bool ipv4_text(const uint8_t bytes[4], char *out, size_t cap)
{
    if (cap < INET_ADDRSTRLEN)
        return false;
    char *o = out;
    for (int i = 0; i < 4; i++) {
        unsigned v = bytes[i];
        if (v >= 100)
            *o++ = (char)('0' + v / 100);
        if (v >= 10)
            *o++ = (char)('0' + v / 10 % 10);
        *o++ = (char)('0' + v % 10);
        *o++ = i < 3 ? '.' : '\0';
    }
    return true;
}

bool address_text(const struct sockaddr *sa, char *out, size_t cap)
{
    if (sa->sa_family == AF_INET)
        return ipv4_text((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr, out, cap);
    if (sa->sa_family != AF_INET6)
        return false;
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a6))
        return ipv4_text(&a6->s6_addr[12], out, cap);
    return inet_ntop(AF_INET6, a6, out, (socklen_t)cap) != NULL;
}

bool address_normalise(const char *text, size_t len, char *out, size_t cap)
{
    char copy[INET6_ADDRSTRLEN];
    if (len >= sizeof copy)
        return false;
    memcpy(copy, text, len);
    copy[len] = '\0';
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, copy, &a4.sin_addr) == 1)
        return address_text((struct sockaddr *)&a4, out, cap);
    if (inet_pton(AF_INET6, copy, &a6.sin6_addr) == 1)
        return address_text((struct sockaddr *)&a6, out, cap);
    return false;
}

bool address_parse_binary(const char *text, int *family, uint8_t bits[16])
{
    memset(bits, 0, 16);
    if (inet_pton(AF_INET, text, bits) == 1) {
        *family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, text, bits) == 1) {
        *family = AF_INET6;
        return true;
    }
    return false;
}

bool trusted_range_contains(const trusted_range *r, int family, const uint8_t bits[16])
{
    if (r->family != family)
        return false;
    int whole = r->prefix / 8, rest = r->prefix % 8;
    if (memcmp(r->bits, bits, (size_t)whole) != 0)
        return false;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return rest == 0 || (r->bits[whole] & mask) == (bits[whole] & mask);
}

/* One entry of the list, ADDR or ADDR/PREFIX, with no bits set past the prefix. */
static bool parse_trusted_range(const char *text, size_t len, trusted_range *out)
{
    char copy[INET6_ADDRSTRLEN + 4];
    if (len == 0 || len >= sizeof copy)
        return false;
    memcpy(copy, text, len);
    copy[len] = '\0';
    char *slash = strchr(copy, '/');
    if (slash)
        *slash = '\0';
    if (!address_parse_binary(copy, &out->family, out->bits))
        return false;
    int width = out->family == AF_INET ? 32 : 128;
    out->prefix = width;
    if (slash) {
        char *end;
        long prefix = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || prefix < 0 || prefix > width)
            return false;
        out->prefix = (int)prefix;
    }
    if (out->family == AF_INET6 && IN6_IS_ADDR_V4MAPPED((struct in6_addr *)out->bits) &&
        out->prefix >= 96) { /* ::ffff:10.0.0.0/104 is 10.0.0.0/8, as a peer is written */
        memmove(out->bits, out->bits + 12, 4);
        memset(out->bits + 4, 0, 12);
        out->family = AF_INET;
        out->prefix -= 96;
        width = 32;
    }
    for (int bit = out->prefix; bit < width; bit++) /* 10.1.2.3/8 means 10.0.0.0/8 */
        out->bits[bit / 8] &= (uint8_t) ~(0x80 >> (bit % 8));
    return true;
}

bool trusted_ranges_parse(const char *list, trusted_range *ranges, size_t max, size_t *count,
                          char *err, size_t errlen)
{
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        while (len && (*p == ' ')) {
            p++;
            len--;
        }
        while (len && p[len - 1] == ' ')
            len--;
        if (*count == max || !parse_trusted_range(p, len, &ranges[*count])) {
            snprintf(err, errlen,
                     "--trust-proxy: expected up to %d numeric IP addresses or CIDR ranges "
                     "(10.0.0.0/8, fd00::/8) separated by commas, got '%s'",
                     (int)max, list);
            return false;
        }
        (*count)++;
        p += strcspn(p, ",");
        p += *p == ',';
    }
    return true;
}

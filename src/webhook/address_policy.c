/* The address rule of --webhook-deny-private; see address_policy.h. */
#include "webhook/address_policy.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A prefix of the IPv4 special-purpose address registry: addr/len. */
typedef struct v4_range {
    uint32_t addr;
    int len;
} v4_range;

/* Every entry of the IANA IPv4 special-purpose address registry. The few marked globally
 * reachable there (AS112, AMT, 192.0.0.9 and .10) are refused too: no webhook lives there. */
static const v4_range v4_special[] = {
    {0x00000000, 8},  /* 0.0.0.0/8 "this network" */
    {0x0A000000, 8},  /* 10.0.0.0/8 private */
    {0x64400000, 10}, /* 100.64.0.0/10 shared address space (CGN) */
    {0x7F000000, 8},  /* 127.0.0.0/8 loopback */
    {0xA9FE0000, 16}, /* 169.254.0.0/16 link-local (cloud metadata) */
    {0xAC100000, 12}, /* 172.16.0.0/12 private */
    {0xC0000000, 24}, /* 192.0.0.0/24 IETF protocol assignments */
    {0xC0000200, 24}, /* 192.0.2.0/24 documentation (TEST-NET-1) */
    {0xC01FC400, 24}, /* 192.31.196.0/24 AS112-v4 */
    {0xC034C100, 24}, /* 192.52.193.0/24 AMT */
    {0xC0586300, 24}, /* 192.88.99.0/24 6to4 relay anycast (deprecated) */
    {0xC0A80000, 16}, /* 192.168.0.0/16 private */
    {0xC0AF3000, 24}, /* 192.175.48.0/24 direct delegation AS112 */
    {0xC6120000, 15}, /* 198.18.0.0/15 benchmarking */
    {0xC6336400, 24}, /* 198.51.100.0/24 documentation (TEST-NET-2) */
    {0xCB007100, 24}, /* 203.0.113.0/24 documentation (TEST-NET-3) */
    {0xE0000000, 4},  /* 224.0.0.0/4 multicast */
    {0xF0000000, 4},  /* 240.0.0.0/4 reserved, 255.255.255.255 included */
};

static bool v4_is_global(uint32_t a)
{
    for (size_t i = 0; i < sizeof v4_special / sizeof v4_special[0]; i++) {
        uint32_t mask = 0xFFFFFFFFu << (32 - v4_special[i].len);
        if ((a & mask) == v4_special[i].addr)
            return false;
    }
    return true;
}

/* A prefix of the IPv6 registry, as its first bytes and its length in bits. */
typedef struct v6_range {
    uint8_t prefix[6];
    int len;
} v6_range;

/* The special-purpose ranges inside 2000::/3, the only IPv6 space allocated for global unicast
 * (everything outside it is refused before this table: ::/96 v4-compatible, ::1, ::,
 * 64:ff9b:1::/48, 100::/64 discard, fc00::/7, fe80::/10, fec0::/10, ff00::/8, ...). All of
 * 2001::/23 is refused, its few globally reachable exceptions included (Teredo is in it). */
static const v6_range v6_special[] = {
    {{0x20, 0x01, 0x00, 0x00}, 23},       /* 2001::/23 IETF protocol assignments, Teredo */
    {{0x20, 0x01, 0x0d, 0xb8}, 32},       /* 2001:db8::/32 documentation */
    {{0x20, 0x02}, 16},                   /* 2002::/16 6to4: carries any IPv4 address */
    {{0x26, 0x20, 0x00, 0x4f, 0x80}, 48}, /* 2620:4f:8000::/48 direct delegation AS112 */
    {{0x3f, 0xff, 0x00}, 20},             /* 3fff::/20 documentation */
};

static bool v6_has_prefix(const uint8_t *b, const v6_range *r)
{
    int whole = r->len / 8, bits = r->len % 8;
    if (memcmp(b, r->prefix, (size_t)whole) != 0)
        return false;
    uint8_t mask = (uint8_t)(0xFF << (8 - bits));
    return bits == 0 || (b[whole] & mask) == (r->prefix[whole] & mask);
}

static uint32_t v4_at(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The IPv4 address an IPv6 one stands for: ::ffff:a.b.c.d (mapped) and 64:ff9b::a.b.c.d (the
 * well-known NAT64 prefix, which a NAT64 gateway turns into a.b.c.d). */
static bool v6_carries_v4(const uint8_t *b, uint32_t *v4)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    if (memcmp(b, mapped, 12) != 0 && memcmp(b, nat64, 12) != 0)
        return false;
    *v4 = v4_at(b + 12);
    return true;
}

bool webhook_address_is_global(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return v4_is_global(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
    if (sa->sa_family != AF_INET6)
        return false;
    const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    uint32_t v4;
    if (v6_carries_v4(b, &v4))
        return v4_is_global(v4);
    if ((b[0] & 0xE0) != 0x20) /* outside 2000::/3 */
        return false;
    for (size_t i = 0; i < sizeof v6_special / sizeof v6_special[0]; i++)
        if (v6_has_prefix(b, &v6_special[i]))
            return false;
    return true;
}

/* Do a and b name the same host address? An IPv6 address carrying an IPv4 one compares as that
 * IPv4 address; the IPv6 scope (zone) is ignored. */
static bool same_address(const struct sockaddr *a, const struct sockaddr *b)
{
    uint32_t a4 = 0, b4 = 0;
    bool a_is_v4 = a->sa_family == AF_INET, b_is_v4 = b->sa_family == AF_INET;
    if (a_is_v4)
        a4 = ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr);
    else if (a->sa_family == AF_INET6)
        a_is_v4 = v6_carries_v4(((const struct sockaddr_in6 *)a)->sin6_addr.s6_addr, &a4);
    if (b_is_v4)
        b4 = ntohl(((const struct sockaddr_in *)b)->sin_addr.s_addr);
    else if (b->sa_family == AF_INET6)
        b_is_v4 = v6_carries_v4(((const struct sockaddr_in6 *)b)->sin6_addr.s6_addr, &b4);
    if (a_is_v4 || b_is_v4)
        return a_is_v4 && b_is_v4 && a4 == b4;
    return a->sa_family == AF_INET6 && b->sa_family == AF_INET6 &&
           !memcmp(((const struct sockaddr_in6 *)a)->sin6_addr.s6_addr,
                   ((const struct sockaddr_in6 *)b)->sin6_addr.s6_addr, 16);
}

/* The interface addresses, read again when older than OWN_ADDRESSES_TTL_NS: getifaddrs costs
 * about a hundred microseconds, and the check runs on every new connection of the delivery
 * worker. An address added to an interface is refused at the latest a second later. */
#define OWN_ADDRESSES_TTL_NS 1000000000LL

static struct {
    pthread_mutex_t lock;
    int64_t read_at_ns;
    bool valid;
    struct sockaddr_storage *addrs;
    size_t count;
} own = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int64_t monotonic_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Reads the interface addresses into own (its lock held); false if they cannot be read. */
static bool read_own_addresses(void)
{
    struct ifaddrs *list = NULL;
    if (getifaddrs(&list) != 0)
        return false;
    size_t n = 0;
    for (struct ifaddrs *i = list; i; i = i->ifa_next)
        n += i->ifa_addr != NULL;
    struct sockaddr_storage *addrs = calloc(n ? n : 1, sizeof *addrs);
    if (!addrs) {
        freeifaddrs(list);
        return false;
    }
    size_t count = 0;
    for (struct ifaddrs *i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr)
            continue;
        size_t len = i->ifa_addr->sa_family == AF_INET    ? sizeof(struct sockaddr_in)
                     : i->ifa_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                          : 0;
        if (len)
            memcpy(&addrs[count++], i->ifa_addr, len);
    }
    freeifaddrs(list);
    free(own.addrs);
    own.addrs = addrs;
    own.count = count;
    return true;
}

bool webhook_address_is_own(const struct sockaddr *sa)
{
    pthread_mutex_lock(&own.lock);
    int64_t now = monotonic_now_ns();
    if (!own.valid || now - own.read_at_ns > OWN_ADDRESSES_TTL_NS) {
        own.valid = read_own_addresses();
        own.read_at_ns = now;
    }
    /* addresses that cannot be read: refuse rather than risk reaching this machine */
    bool is_own = !own.valid;
    for (size_t i = 0; i < own.count && !is_own; i++)
        is_own = same_address(sa, (const struct sockaddr *)&own.addrs[i]);
    pthread_mutex_unlock(&own.lock);
    return is_own;
}

bool webhook_address_allowed(const struct sockaddr *sa)
{
    return webhook_address_is_global(sa) && !webhook_address_is_own(sa);
}

bool webhook_host_allowed(const char *host)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    char bare[256];
    size_t len = strlen(host);
    if (len >= 2 && host[0] == '[' && host[len - 1] == ']' && len - 2 < sizeof bare) {
        memcpy(bare, host + 1, len - 2);
        bare[len - 2] = '\0';
        host = bare;
    }
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return true; /* unresolvable now; the delivery's own socket check refuses it later */
    bool allowed = true;
    for (struct addrinfo *r = res; r && allowed; r = r->ai_next)
        allowed = webhook_address_allowed(r->ai_addr);
    freeaddrinfo(res);
    return allowed;
}

#ifndef PAYD_HTTP_ADDRESS_H
#define PAYD_HTTP_ADDRESS_H
/* Numeric IP addresses, as the server reads a peer and --trust-proxy names one: pure functions,
 * no socket and no name lookup. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* One entry of --trust-proxy: an address and how many of its leading bits must match (32 or 128
 * for a single address). IPv4 is kept as such, so 10.0.0.0/8 matches an IPv4 peer however it
 * connected (numeric_address writes an IPv4-mapped peer as IPv4). */
typedef struct trusted_range {
    int family; /* AF_INET or AF_INET6 */
    uint8_t bits[16];
    int prefix;
} trusted_range;

/* The numeric form of an address, an IPv4 client of an IPv6 listener as plain IPv4, so one
 * client has one spelling whichever way it came in. */
bool address_text(const struct sockaddr *sa, char *out, size_t cap);
/* text (up to len bytes) as a numeric IPv4 or IPv6 address, written in its one spelling. */
bool address_normalise(const char *text, size_t len, char *out, size_t cap);
/* text as a binary address of either family; false when it is not a numeric address. */
bool address_parse_binary(const char *text, int *family, uint8_t bits[16]);
bool trusted_range_contains(const trusted_range *r, int family, const uint8_t bits[16]);
/* A comma-separated list of addresses or CIDR ranges into ranges[*count..max), *count counting
 * them; false, with the reason in err, when an entry is not one or there are more than max. */
bool trusted_ranges_parse(const char *list, trusted_range *ranges, size_t max, size_t *count,
                          char *err, size_t errlen);

#endif

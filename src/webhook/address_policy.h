#ifndef PAYD_WEBHOOK_ADDRESS_POLICY_H
#define PAYD_WEBHOOK_ADDRESS_POLICY_H
/* Which addresses a webhook may reach under --webhook-deny-private (docs/webhooks.md, "Which
 * addresses a webhook may reach"): global unicast only. Everything in the IANA IPv4 and IPv6
 * special-purpose address registries is refused, and so is every address of this machine's own
 * interfaces. The rule is checked when an endpoint is saved (every address its host resolves
 * to) and again on the address each delivery actually connects to. */
#include <stdbool.h>
#include <sys/socket.h>

/* Pure: true when the address is global unicast, i.e. outside every special-purpose range
 * (IPv4-mapped and NAT64 64:ff9b::/96 addresses are judged by the IPv4 address they carry).
 * Any other family is not global. */
bool webhook_address_is_global(const struct sockaddr *sa);

/* True when the address (or the IPv4 address a mapped or NAT64 one carries) belongs to one of
 * this machine's interfaces (getifaddrs, read again once a second at most). */
bool webhook_address_is_own(const struct sockaddr *sa);

/* The rule of --webhook-deny-private: global and not this machine's own. */
bool webhook_address_allowed(const struct sockaddr *sa);

/* Resolves host (a name, an IPv4 address or a bracketed IPv6 one) and answers whether every
 * address it resolves to is allowed. A name that does not resolve now is let through: the
 * delivery's own connect-time check refuses it later if it then resolves to a refused address. */
bool webhook_host_allowed(const char *host);

#endif

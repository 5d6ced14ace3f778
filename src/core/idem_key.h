#ifndef PAYD_CORE_IDEM_KEY_H
#define PAYD_CORE_IDEM_KEY_H
/* The Idempotency-Key header's syntax (§2): 1-255 visible ASCII characters, or the same as a
 * Structured-Fields string ("abc"), which is unquoted first so abc and "abc" are one key. */

#define IDEM_KEY_MAX 255

/* Parses the header value into out. Returns 0, or -1 for anything else. */
int idem_parse_key(const char *header, char out[IDEM_KEY_MAX + 1]);

#endif

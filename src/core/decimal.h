/* Decimal digits written in place: one table of digit pairs and one integer writer for the JSON
 * writer's numbers, a time's fields, the rate-limit headers and a list page's SQL and Link. */
#ifndef PAYD_CORE_DECIMAL_H
#define PAYD_CORE_DECIMAL_H

#include <stdint.h>

#define DECIMAL_CHARS 20 /* "-9223372036854775808" */

/* "00" to "99", two digits at once: decimal_pairs + 2 * n for 0 <= n < 100. */
extern const char decimal_pairs[200];

/* v in decimal at o (room for DECIMAL_CHARS), without a NUL; returns the end. */
char *decimal_put(char *o, int64_t v);

#endif

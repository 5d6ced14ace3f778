/* Command-line durations and rates (§13): "500ms" "60s" "5m" "24h"; "100/s" "6000/m" "1000/h".
 * A unit is always required so that "60" can never silently mean seconds or milliseconds. */
#ifndef PAYD_CORE_UNITS_H
#define PAYD_CORE_UNITS_H

#include <stdint.h>

/* Integer + unit (ms, s, m, h), nothing else: rejects empty, signs, spaces, missing or unknown
 * units, trailing junk and overflow. 0 ok / -1. */
int parse_duration_ms(const char *s, int64_t *out_ms);

typedef struct {
    int64_t count;
    int64_t period_ms;
} rate_spec; /* 100/s = {100, 1000} */

/* "<count>/<unit>" with unit s, m or h and count >= 1. 0 ok / -1. */
int parse_rate(const char *s, rate_spec *out);

#endif

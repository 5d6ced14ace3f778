/* Durations and rates for the command line. */
#include "core/units.h"

#include <string.h>

/* The unit table shared by both parsers: one place says what each unit means. */
static const struct {
    const char *name;
    int64_t ms;
} UNITS[] = {{"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 60 * 60 * 1000}};

/* Reads one or more decimal digits; -1 on none or on overflow. */
static int parse_count(const char **p, int64_t *out)
{
    const char *s = *p;
    int64_t v = 0;
    if (*s < '0' || *s > '9')
        return -1;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (v > (INT64_MAX - (*s - '0')) / 10)
            return -1;
        v = v * 10 + (*s - '0');
    }
    *p = s;
    *out = v;
    return 0;
}

/* Milliseconds in the unit that is exactly the rest of the string, or -1. */
static int64_t unit_ms(const char *s)
{
    for (size_t i = 0; i < sizeof UNITS / sizeof UNITS[0]; i++)
        if (strcmp(s, UNITS[i].name) == 0)
            return UNITS[i].ms;
    return -1;
}

int parse_duration_ms(const char *s, int64_t *out_ms)
{
    int64_t n, ms;
    if (s == NULL || parse_count(&s, &n) != 0 || (ms = unit_ms(s)) < 0 || n > INT64_MAX / ms)
        return -1;
    *out_ms = n * ms;
    return 0;
}

int parse_rate(const char *s, rate_spec *out)
{
    int64_t n, ms;
    /* Rates are per second, minute or hour (§13): "/ms" is refused. */
    if (s == NULL || parse_count(&s, &n) != 0 || n < 1 || *s != '/' || (ms = unit_ms(s + 1)) < 1000)
        return -1;
    out->count = n;
    out->period_ms = ms;
    return 0;
}

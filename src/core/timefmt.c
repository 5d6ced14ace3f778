/* Clocks and RFC 3339. The calendar arithmetic is done here rather than with gmtime/timegm so it
 * is pure (no locale, no TZ) and defined for every input. */
#include "core/timefmt.h"

#include <string.h>

#include <stdbool.h>
#include <stdio.h>
#include <time.h>

#include "core/decimal.h"

#define US_PER_SEC 1000000LL
#define US_PER_DAY (86400LL * US_PER_SEC)

int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * US_PER_SEC + ts.tv_nsec / 1000;
}

int64_t monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Days since 1970-01-01 of a proleptic Gregorian date, and back (era-based civil calendar
 * arithmetic, exact for every year). */
int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int *m, int *d)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static void put_two(char *out, int v)
{
    memcpy(out, decimal_pairs + 2 * v, 2);
}

/* The clamp of format_rfc3339_ms: 0000-01-01 and 10000-01-01, in days since 1970-01-01, as
 * days_from_civil gives them (the unit test formats both ends of the range). */
#define FIRST_DAY (-719528LL)
#define END_DAY   2932897LL

/* "YYYY-MM-DD" of a day since 1970-01-01 (FIRST_DAY <= day < END_DAY). */
static void format_date(int64_t day, char out[10])
{
    int64_t y;
    int m, d;
    civil_from_days(day, &y, &m, &d);
    put_two(out, (int)(y / 100));
    put_two(out + 2, (int)(y % 100));
    out[4] = '-';
    put_two(out + 5, m);
    out[7] = '-';
    put_two(out + 8, d);
}

void format_rfc3339_ms(int64_t unix_us, char out[RFC3339_STR_MAX])
{
    /* a list page writes one per row, of rows mostly made the same day: each thread keeps the
     * date it wrote last */
    static _Thread_local int64_t last_day = INT64_MIN;
    static _Thread_local char last_date[10];
    const int64_t min_us = FIRST_DAY * US_PER_DAY, max_us = END_DAY * US_PER_DAY - 1;
    if (unix_us < min_us)
        unix_us = min_us;
    if (unix_us > max_us)
        unix_us = max_us;

    int64_t days = floor_div(unix_us, US_PER_DAY);
    int64_t us_of_day = unix_us - days * US_PER_DAY;
    if (days != last_day) {
        format_date(days, last_date);
        last_day = days;
    }
    memcpy(out, last_date, 10);
    /* by hand: this runs for every row of a list page, and snprintf costs more than the rest */
    int secs = (int)(us_of_day / US_PER_SEC), ms = (int)(us_of_day % US_PER_SEC / 1000);
    out[10] = 'T';
    put_two(out + 11, secs / 3600);
    out[13] = ':';
    put_two(out + 14, secs / 60 % 60);
    out[16] = ':';
    put_two(out + 17, secs % 60);
    out[19] = '.';
    out[20] = (char)('0' + ms / 100);
    put_two(out + 21, ms % 100);
    out[23] = 'Z';
    out[24] = '\0';
}

/* Reads exactly n decimal digits. */
static bool digits(const char **p, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        char c = (*p)[i];
        if (c < '0' || c > '9')
            return false;
        v = v * 10 + (c - '0');
    }
    *p += n;
    *out = v;
    return true;
}

static bool expect(const char **p, char a, char b)
{
    if (**p != a && **p != b)
        return false;
    (*p)++;
    return true;
}

static bool is_leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : days[m - 1];
}

int parse_rfc3339(const char *s, int64_t *out_us)
{
    if (s == NULL)
        return -1;
    const char *p = s;
    int y, mo, d, h, mi, sec;
    if (!digits(&p, 4, &y) || !expect(&p, '-', '-') || !digits(&p, 2, &mo) ||
        !expect(&p, '-', '-') || !digits(&p, 2, &d) || !expect(&p, 'T', 't') ||
        !digits(&p, 2, &h) || !expect(&p, ':', ':') || !digits(&p, 2, &mi) ||
        !expect(&p, ':', ':') || !digits(&p, 2, &sec))
        return -1;
    if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 59)
        return -1;

    int64_t frac_us = 0;
    if (*p == '.') {
        p++;
        int n = 0;
        for (; *p >= '0' && *p <= '9'; p++, n++) {
            if (n == 6)
                return -1;
            frac_us = frac_us * 10 + (*p - '0');
        }
        if (n == 0)
            return -1;
        for (; n < 6; n++)
            frac_us *= 10;
    }

    int64_t offset_s = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int sign = *p++ == '-' ? -1 : 1;
        int oh, om;
        if (!digits(&p, 2, &oh) || !expect(&p, ':', ':') || !digits(&p, 2, &om) || oh > 23 ||
            om > 59)
            return -1;
        offset_s = sign * (oh * 3600 + om * 60);
    } else {
        return -1;
    }
    if (*p != '\0')
        return -1;

    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - offset_s;
    *out_us = secs * US_PER_SEC + frac_us;
    return 0;
}

#include "core/backoff.h"
#include "core/timefmt.h"

#include <ctype.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* A server can ask for anything; a day is already far beyond any sane max_delay, and capping
 * here keeps every later multiplication in range. */
#define RETRY_AFTER_CAP_SECONDS 86400LL

int64_t backoff_nominal_ms(const backoff_policy *p, int retry)
{
    int64_t nominal = p->base_ms > 0 ? p->base_ms : 0;
    int64_t cap = p->max_delay_ms > 0 ? p->max_delay_ms : 0;
    for (int i = 1; i < retry && nominal < cap; i++) {
        if (nominal > INT64_MAX / 2)
            break;
        nominal *= 2;
    }
    return nominal < cap ? nominal : cap;
}

int64_t backoff_jittered_ms(const backoff_policy *p, int retry, double u)
{
    if (!(u >= 0.0)) /* also catches NaN */
        u = 0.0;
    if (u >= 1.0)
        u = nextafter(1.0, 0.0);
    double factor = 1.0 + BACKOFF_JITTER * (2.0 * u - 1.0);
    return (int64_t)llround((double)backoff_nominal_ms(p, retry) * factor);
}

int backoff_next_delay_ms(const backoff_policy *p, int retry, double u, int64_t retry_after_ms,
                          int64_t *delay_ms)
{
    if (retry_after_ms > p->max_delay_ms)
        return -1;
    int64_t delay = backoff_jittered_ms(p, retry, u);
    /* Retry-After is a floor; when it decides, spread clients over up to 30 % above it, so the
     * ones it sent away together do not all come back in the same instant */
    if (retry_after_ms > 0 && delay <= retry_after_ms) {
        double spread = u < 0 ? 0 : u >= 1 ? 1 : u;
        delay = retry_after_ms + (int64_t)llround((double)retry_after_ms * BACKOFF_JITTER * spread);
    }
    *delay_ms = delay;
    return 0;
}

double backoff_unit_from_bits(uint64_t bits)
{
    return (double)(bits >> 11) * 0x1.0p-53;
}

static int month_from_name(const char *name)
{
    static const char names[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    for (int i = 0; i < 12; i++)
        if (strcmp(name, names[i]) == 0)
            return i + 1;
    return 0;
}

static int days_in_month(int year, int month)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    return month == 2 && leap ? 29 : days[month - 1];
}

/* True when only optional white space is left from s on. */
static bool only_space(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return *s == '\0';
}

/* The three HTTP-date forms of RFC 9110 §5.6.7, as Unix seconds. The day name is not checked:
 * a recipient is told to be lenient, and the date alone fixes the instant. */
static int parse_http_date(const char *s, int64_t *unix_seconds)
{
    char weekday[10], month_name[4];
    int day, year, hour, minute, second, used = 0;
    if (sscanf(s, "%3[A-Za-z], %2d %3[A-Za-z] %4d %2d:%2d:%2d GMT%n", weekday, &day, month_name,
               &year, &hour, &minute, &second, &used) == 7 &&
        used > 0 && only_space(s + used)) {
        /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
    } else if (used = 0, sscanf(s, "%9[A-Za-z], %2d-%3[A-Za-z]-%2d %2d:%2d:%2d GMT%n", weekday,
                                &day, month_name, &year, &hour, &minute, &second, &used) == 7 &&
                             used > 0 && only_space(s + used)) {
        /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT. Two-digit years: 70-99 are 19xx. */
        year += year < 70 ? 2000 : 1900;
    } else if (used = 0, sscanf(s, "%3[A-Za-z] %3[A-Za-z] %2d %2d:%2d:%2d %4d%n", weekday,
                                month_name, &day, &hour, &minute, &second, &year, &used) == 7 &&
                             used > 0 && only_space(s + used)) {
        /* asctime: Sun Nov  6 08:49:37 1994 */
    } else {
        return -1;
    }
    int month = month_from_name(month_name);
    if (month == 0 || year < 1970 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
        minute > 59 || second > 60 || hour < 0 || minute < 0 || second < 0)
        return -1;
    *unix_seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
    return 0;
}

int backoff_parse_retry_after(const char *value, int64_t now_unix_ms, int64_t *delay_ms)
{
    while (*value == ' ' || *value == '\t')
        value++;
    if (isdigit((unsigned char)*value)) {
        int64_t seconds = 0;
        const char *p = value;
        for (; isdigit((unsigned char)*p); p++)
            if (seconds < RETRY_AFTER_CAP_SECONDS)
                seconds = seconds * 10 + (*p - '0');
        if (!only_space(p))
            return -1;
        if (seconds > RETRY_AFTER_CAP_SECONDS)
            seconds = RETRY_AFTER_CAP_SECONDS;
        *delay_ms = seconds * 1000;
        return 0;
    }
    int64_t when;
    if (parse_http_date(value, &when) != 0)
        return -1;
    int64_t delta_ms = when * 1000 - now_unix_ms;
    if (delta_ms < 0)
        delta_ms = 0;
    if (delta_ms > RETRY_AFTER_CAP_SECONDS * 1000)
        delta_ms = RETRY_AFTER_CAP_SECONDS * 1000;
    *delay_ms = delta_ms;
    return 0;
}

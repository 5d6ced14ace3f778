/* RFC 3339 formatting and parsing, and the two clocks. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "core/timefmt.h"

static void test_format_known(void **state)
{
    static const struct {
        int64_t us;
        const char *text;
    } cases[] = {
        {0, "1970-01-01T00:00:00.000Z"},
        {1767225600000000LL, "2026-01-01T00:00:00.000Z"},
        {1791793867123000LL, "2026-10-12T08:31:07.123Z"},
        {1791793867123999LL, "2026-10-12T08:31:07.123Z"}, /* truncated, never rounded up */
        {1835481599999999LL, "2028-02-29T23:59:59.999Z"}, /* a leap day */
        {951782400000000LL, "2000-02-29T00:00:00.000Z"},
        {-1, "1969-12-31T23:59:59.999Z"}, /* before 1970: toward the past */
        {-86400000000LL, "1969-12-31T00:00:00.000Z"},
        {253402300799999000LL, "9999-12-31T23:59:59.999Z"},
        {INT64_MAX, "9999-12-31T23:59:59.999Z"}, /* clamped to four-digit years */
        {-62167219200000000LL, "0000-01-01T00:00:00.000Z"},
        {INT64_MIN, "0000-01-01T00:00:00.000Z"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[RFC3339_STR_MAX];
        format_rfc3339_ms(cases[i].us, out);
        assert_string_equal(out, cases[i].text);
    }
}

static void test_parse_known(void **state)
{
    static const struct {
        const char *text;
        int64_t us;
    } cases[] = {
        {"1970-01-01T00:00:00Z", 0},
        {"2026-10-12T08:31:07.123Z", 1791793867123000LL},
        {"2026-10-12t08:31:07.123z", 1791793867123000LL},
        {"2026-10-12T08:31:07.1Z", 1791793867100000LL},
        {"2026-10-12T08:31:07.123456Z", 1791793867123456LL},
        {"2026-10-12T08:31:07.000001Z", 1791793867000001LL},
        {"2026-10-12T10:31:07.123+02:00", 1791793867123000LL},
        {"2026-10-12T03:01:07.123-05:30", 1791793867123000LL},
        {"2026-10-12T08:31:07.123+00:00", 1791793867123000LL},
        {"2026-10-12T08:31:07.123-00:00", 1791793867123000LL},
        {"2026-10-13T08:30:07.123+23:59", 1791793867123000LL},
        {"2028-02-29T23:59:59.999999Z", 1835481599999999LL},
        {"2000-02-29T00:00:00Z", 951782400000000LL},
        {"1969-12-31T23:59:59.999Z", -1000},
        {"0000-01-01T00:00:00Z", -62167219200000000LL},
        {"9999-12-31T23:59:59.999999Z", 253402300799999999LL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t us = 42;
        if (parse_rfc3339(cases[i].text, &us) != 0)
            fail_msg("rejected \"%s\"", cases[i].text);
        assert_int_equal(us, cases[i].us);
    }
}

static void test_parse_rejects(void **state)
{
    static const char *bad[] = {
        "",
        "2026-10-12",           /* no time */
        "2026-10-12T08:31:07",  /* no zone */
        "2026-10-12T08:31Z",    /* no seconds */
        "2026-10-12 08:31:07Z", /* space for T */
        "2026-10-12X08:31:07Z",
        "2026-02-30T00:00:00Z", /* impossible dates */
        "2026-04-31T00:00:00Z",
        "2026-02-29T00:00:00Z", /* not a leap year */
        "1900-02-29T00:00:00Z", /* century, not a leap year */
        "2026-13-01T00:00:00Z",
        "2026-00-01T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-01-32T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T23:60:00Z",
        "2016-12-31T23:59:60Z", /* leap second */
        "2026-1-01T00:00:00Z",  /* field widths */
        "2026-01-1T00:00:00Z",
        "2026-01-01T0:00:00Z",
        "26-01-01T00:00:00Z",
        "+2026-01-01T00:00:00Z",
        "2026/01/01T00:00:00Z",
        "2026-01-01T00:00:00.Z",        /* empty fraction */
        "2026-01-01T00:00:00.1234567Z", /* more than 6 digits */
        "2026-01-01T00:00:00,5Z",
        "2026-01-01T00:00:00+0200", /* offset forms */
        "2026-01-01T00:00:00+02",
        "2026-01-01T00:00:00+2:00",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T00:00:00+02:60",
        "2026-01-01T00:00:00 Z",
        "2026-01-01T00:00:00Z ", /* trailing junk */
        " 2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00ZZ",
        "2026-01-01T00:00:00+02:00Z",
        "2026-01-01T00:00:00UTC",
        "2026-0a-01T00:00:00Z",
        "2026-01-01T00:00:00.12a4Z",
        "now",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t us = 42;
        if (parse_rfc3339(bad[i], &us) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(us, 42);
    }
    int64_t us;
    assert_int_equal(parse_rfc3339(NULL, &us), -1);
}

static void test_round_trip(void **state)
{
    srand(11);
    for (int i = 0; i < 100000; i++) {
        /* whole milliseconds between 1970 and about 2106 */
        int64_t us = ((int64_t)rand() * 2 + (rand() & 1)) * 1000 * 1000 + rand() % 1000 * 1000;
        char text[RFC3339_STR_MAX];
        int64_t back;
        format_rfc3339_ms(us, text);
        assert_int_equal(parse_rfc3339(text, &back), 0);
        assert_int_equal(back, us);
    }
}

/* Each thread keeps the date it wrote last: times of one day, of the days around it, and back
 * again each read the right date, in both directions and across a month, a year and 1970. */
static void test_date_kept_between_calls(void **state)
{
    static const int64_t starts[] = {-86400000000LL * 3, 1767225600000000LL - 86400000000LL * 2,
                                     951782400000000LL - 86400000000LL};
    for (size_t s = 0; s < sizeof starts / sizeof starts[0]; s++) {
        for (int step = 0; step < 2 * 24 * 5; step++) {
            /* half-hours forward over five days, each followed by one from the first day */
            int64_t times[2] = {starts[s] + step * 1800000000LL + 123000,
                                starts[s] + step % 48 * 1800000000LL};
            for (int k = 0; k < 2; k++) {
                char text[RFC3339_STR_MAX];
                int64_t back;
                format_rfc3339_ms(times[k], text);
                assert_int_equal(parse_rfc3339(text, &back), 0);
                assert_int_equal(back, times[k]);
            }
        }
    }
}

static void test_clocks(void **state)
{
    int64_t wall = now_us();
    assert_true(wall > 1767225600000000LL - 365LL * 86400 * 1000000); /* a sane clock */
    int64_t a = monotonic_ns();
    int64_t b = monotonic_ns();
    assert_true(a > 0);
    assert_true(b >= a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_known),
        cmocka_unit_test(test_parse_known),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_date_kept_between_calls),
        cmocka_unit_test(test_clocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

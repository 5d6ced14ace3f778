/* Durations and rates as the command line takes them (§13). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core/units.h"

static void test_durations(void **state)
{
    static const struct {
        const char *in;
        int64_t ms;
    } ok[] = {
        {"500ms", 500},
        {"60s", 60000},
        {"5m", 300000},
        {"24h", 86400000},
        {"0s", 0},
        {"1ms", 1},
        {"007s", 7000}, /* leading zeros are still an integer */
        {"9223372036854775807ms", INT64_MAX},
        {"9223372036854775s", 9223372036854775000},
        {"2562047788015h", 2562047788015 * 3600000},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int64_t ms = -1;
        if (parse_duration_ms(ok[i].in, &ms) != 0)
            fail_msg("rejected \"%s\"", ok[i].in);
        assert_int_equal(ms, ok[i].ms);
    }
}

static void test_duration_rejects(void **state)
{
    static const char *bad[] = {
        "",
        "s", /* no number */
        "ms",
        "60",  /* no unit */
        "-5s", /* negative */
        "+5s", /* signs at all */
        "5x",  /* unknown units */
        "5d",
        "5sec",
        "5us",
        "5S", /* units are lower case */
        "5MS",
        "5M",
        "5 s", /* white space */
        " 5s",
        "5s ",
        "5s\n",
        "5.5s", /* integers only */
        "1e3ms",
        "0x10s",
        "5s5", /* trailing junk */
        "5ss",
        "5mss",
        "5s5s",
        "9223372036854775808ms", /* INT64_MAX + 1 */
        "9223372036854775807s",  /* overflows once scaled */
        "2562047788016h",
        "99999999999999999999999h",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t ms = 42;
        if (parse_duration_ms(bad[i], &ms) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(ms, 42); /* untouched on failure */
    }
    int64_t ms;
    assert_int_equal(parse_duration_ms(NULL, &ms), -1);
}

static void test_rates(void **state)
{
    static const struct {
        const char *in;
        int64_t count, period_ms;
    } ok[] = {
        {"100/s", 100, 1000},
        {"6000/m", 6000, 60000},
        {"1000/h", 1000, 3600000},
        {"1/s", 1, 1000},
        {"9223372036854775807/h", INT64_MAX, 3600000},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        rate_spec r = {0, 0};
        if (parse_rate(ok[i].in, &r) != 0)
            fail_msg("rejected \"%s\"", ok[i].in);
        assert_int_equal(r.count, ok[i].count);
        assert_int_equal(r.period_ms, ok[i].period_ms);
    }
}

static void test_rate_rejects(void **state)
{
    static const char *bad[] = {
        "",       "100",               /* no period */
        "100/",   "/s",                /* no count */
        "0/s",                         /* count >= 1 */
        "-1/s",   "+1/s",    "100/ms", /* not a rate period */
        "100/d",  "100/sec", "100/S",
        "100/1s", "100 /s", /* white space */
        "100/ s", "100/s ",  " 100/s",
        "1.5/s",  "100/s/s",                          /* trailing junk */
        "100//s", "100s",    "9223372036854775808/s", /* overflow */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rate_spec r = {42, 42};
        if (parse_rate(bad[i], &r) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(r.count, 42);
        assert_int_equal(r.period_ms, 42);
    }
    rate_spec r;
    assert_int_equal(parse_rate(NULL, &r), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_duration_rejects),
        cmocka_unit_test(test_rates),
        cmocka_unit_test(test_rate_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

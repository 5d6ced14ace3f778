/* The pure retry-delay policy (src/core/backoff.c): exponential delays, jitter band, cap,
 * Retry-After as a floor and as a reason to give up, and the Retry-After parser. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/backoff.h"

static const backoff_policy defaults = {.base_ms = 1000, .max_delay_ms = 30000};

static void test_nominal_delay_doubles_then_caps(void **state)
{
    assert_int_equal(backoff_nominal_ms(&defaults, 1), 1000);
    assert_int_equal(backoff_nominal_ms(&defaults, 2), 2000);
    assert_int_equal(backoff_nominal_ms(&defaults, 3), 4000);
    assert_int_equal(backoff_nominal_ms(&defaults, 5), 16000);
    assert_int_equal(backoff_nominal_ms(&defaults, 6), 30000);
    assert_int_equal(backoff_nominal_ms(&defaults, 1000), 30000);
    assert_int_equal(backoff_nominal_ms(&defaults, 2147483647), 30000);
}

static void test_nominal_delay_never_overflows(void **state)
{
    const backoff_policy huge = {.base_ms = INT64_MAX / 4, .max_delay_ms = INT64_MAX};
    assert_true(backoff_nominal_ms(&huge, 200) > 0);
    const backoff_policy zero = {.base_ms = 0, .max_delay_ms = 0};
    assert_int_equal(backoff_nominal_ms(&zero, 7), 0);
}

static void test_jitter_spans_seventy_to_one_hundred_thirty_percent(void **state)
{
    for (int retry = 1; retry <= 10; retry++) {
        int64_t nominal = backoff_nominal_ms(&defaults, retry);
        assert_int_equal(backoff_jittered_ms(&defaults, retry, 0.0), nominal * 7 / 10);
        assert_int_equal(backoff_jittered_ms(&defaults, retry, 0.5), nominal);
        assert_int_equal(backoff_jittered_ms(&defaults, retry, 0.999999999), nominal * 13 / 10);
        for (int i = 0; i < 1000; i++) {
            double u = backoff_unit_from_bits((uint64_t)i * 0x9E3779B97F4A7C15ULL);
            int64_t d = backoff_jittered_ms(&defaults, retry, u);
            assert_true(d >= nominal * 7 / 10 && d <= nominal * 13 / 10);
        }
    }
}

static void test_jitter_input_out_of_range_is_clamped(void **state)
{
    assert_int_equal(backoff_jittered_ms(&defaults, 1, -3.0), 700);
    assert_int_equal(backoff_jittered_ms(&defaults, 1, 7.0), 1300);
}

static void test_retry_after_is_a_floor(void **state)
{
    int64_t delay = -1;
    assert_int_equal(backoff_next_delay_ms(&defaults, 1, 0.0, 2000, &delay), 0);
    assert_int_equal(delay, 2000); /* never below the server's word */
    assert_int_equal(backoff_next_delay_ms(&defaults, 1, 0.5, 2000, &delay), 0);
    assert_int_equal(delay, 2300); /* spread above it, so clients do not return in lockstep */
    assert_int_equal(backoff_next_delay_ms(&defaults, 3, 0.5, 2000, &delay), 0);
    assert_int_equal(delay, 4000); /* our own delay is longer: keep it */
    assert_int_equal(backoff_next_delay_ms(&defaults, 1, 0.5, -1, &delay), 0);
    assert_int_equal(delay, 1000);
    assert_int_equal(backoff_next_delay_ms(&defaults, 1, 0.5, 0, &delay), 0);
    assert_int_equal(delay, 1000);
}

static void test_retry_after_beyond_max_delay_means_give_up(void **state)
{
    int64_t delay = -1;
    assert_int_equal(backoff_next_delay_ms(&defaults, 1, 0.0, 30000, &delay), 0);
    assert_int_equal(delay, 30000);
    assert_int_equal(backoff_next_delay_ms(&defaults, 1, 0.5, 30000, &delay), 0);
    assert_int_equal(delay, 34500); /* spread above the floor, as jitter above the cap is */
    assert_int_equal(backoff_next_delay_ms(&defaults, 1, 0.5, 30001, &delay), -1);
}

static void test_unit_from_bits_stays_below_one(void **state)
{
    assert_true(backoff_unit_from_bits(0) == 0.0);
    assert_true(backoff_unit_from_bits(UINT64_MAX) < 1.0);
    assert_true(backoff_unit_from_bits(UINT64_MAX) > 0.999);
}

static const int64_t now_ms = 1791793867000LL; /* Mon, 12 Oct 2026 08:31:07 GMT */

static int64_t parsed(const char *value)
{
    int64_t delay = -12345;
    if (backoff_parse_retry_after(value, now_ms, &delay) != 0)
        return -1;
    return delay;
}

static void test_retry_after_delta_seconds(void **state)
{
    assert_int_equal(parsed("0"), 0);
    assert_int_equal(parsed("2"), 2000);
    assert_int_equal(parsed(" 120 "), 120000);
    assert_int_equal(parsed("99999999999999999999999"), 86400LL * 1000);
}

static void test_retry_after_http_dates(void **state)
{
    assert_int_equal(parsed("Mon, 12 Oct 2026 08:31:10 GMT"), 3000);   /* IMF-fixdate */
    assert_int_equal(parsed("Monday, 12-Oct-26 08:31:37 GMT"), 30000); /* RFC 850 */
    assert_int_equal(parsed("Mon Oct 12 08:32:07 2026"), 60000);       /* asctime */
    assert_int_equal(parsed("Thu, 01 Jan 2026 00:00:00 GMT"), 0);      /* in the past */
    assert_int_equal(parsed("Sun, 06 Nov 1994 08:49:37 GMT"), 0);
    assert_int_equal(parsed("Tue, 13 Oct 2026 08:31:07 GMT"), 86400LL * 1000);
}

static void test_retry_after_garbage_is_refused(void **state)
{
    const char *bad[] = {"",
                         "   ",
                         "-1",
                         "1.5",
                         "2 seconds",
                         "soon",
                         "Mon, 12 Foo 2026 08:31:10 GMT",
                         "Mon, 30 Feb 2026 08:31:10 GMT",
                         "Mon, 12 Oct 2026 25:31:10 GMT",
                         "Mon, 12 Oct 2026 08:31:10 UTC",
                         "Mon, 12 Oct 2026 08:31:10 GMT trailing",
                         "Mon, 12 Oct 2026"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t delay;
        if (backoff_parse_retry_after(bad[i], now_ms, &delay) == 0)
            fail_msg("accepted \"%s\"", bad[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nominal_delay_doubles_then_caps),
        cmocka_unit_test(test_nominal_delay_never_overflows),
        cmocka_unit_test(test_jitter_spans_seventy_to_one_hundred_thirty_percent),
        cmocka_unit_test(test_jitter_input_out_of_range_is_clamped),
        cmocka_unit_test(test_retry_after_is_a_floor),
        cmocka_unit_test(test_retry_after_beyond_max_delay_means_give_up),
        cmocka_unit_test(test_unit_from_bits_stays_below_one),
        cmocka_unit_test(test_retry_after_delta_seconds),
        cmocka_unit_test(test_retry_after_http_dates),
        cmocka_unit_test(test_retry_after_garbage_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

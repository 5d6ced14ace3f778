/* payd_webhook_verify and payd_webhook_sign (src/client/webhook.c) against a vector computed
 * independently (Python's hmac), and every way a delivery must be refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "payd/client.h"

#define SECRET "whsec_test"
#define BODY   "{\"id\":\"evt_1\"}"
#define T      1796000000
#define MAC    "f66de723c03bf01e9313eae58df6d62f9b79004655cf5c7b68b055a9b466b64a"
#define HEADER "t=1796000000,v1=" MAC

static payd_webhook_check check(const char *secret, const char *header, const char *body,
                                int64_t now)
{
    return payd_webhook_verify(secret, header, body, strlen(body), 0, now);
}

static void test_sign_matches_the_reference_vector(void **state)
{
    (void)state;
    char out[128];
    assert_int_equal(payd_webhook_sign(SECRET, T, BODY, strlen(BODY), out, sizeof out), 0);
    assert_string_equal(out, HEADER);
    assert_int_equal(payd_webhook_sign(SECRET, T, BODY, strlen(BODY), out, 40), -1);
}

static void test_a_good_delivery_verifies(void **state)
{
    (void)state;
    assert_int_equal(check(SECRET, HEADER, BODY, T), PAYD_WEBHOOK_OK);
    assert_int_equal(check(SECRET, HEADER, BODY, T + 299), PAYD_WEBHOOK_OK);
    assert_int_equal(check(SECRET, HEADER, BODY, T - 299), PAYD_WEBHOOK_OK);
    /* a rotated secret: one of several v1= matching is enough, in any position */
    const char *two =
        "t=1796000000,v1=0000000000000000000000000000000000000000000000000000000000000000,"
        "v1=" MAC;
    assert_int_equal(check(SECRET, two, BODY, T), PAYD_WEBHOOK_OK);
}

static void test_body_timestamp_or_secret_changed_fail(void **state)
{
    (void)state;
    assert_int_equal(check(SECRET, HEADER, "{\"id\":\"evt_2\"}", T), PAYD_WEBHOOK_BAD_SIGNATURE);
    assert_int_equal(check(SECRET, HEADER, BODY " ", T), PAYD_WEBHOOK_BAD_SIGNATURE);
    assert_int_equal(check(SECRET, "t=1796000001,v1=" MAC, BODY, T), PAYD_WEBHOOK_BAD_SIGNATURE);
    assert_int_equal(check("whsec_other", HEADER, BODY, T), PAYD_WEBHOOK_BAD_SIGNATURE);
    char flipped[] = HEADER;
    flipped[strlen(flipped) - 1] = flipped[strlen(flipped) - 1] == 'a' ? 'b' : 'a';
    assert_int_equal(check(SECRET, flipped, BODY, T), PAYD_WEBHOOK_BAD_SIGNATURE);
}

static void test_outside_the_window_fails_even_with_a_good_mac(void **state)
{
    (void)state;
    assert_int_equal(check(SECRET, HEADER, BODY, T + 301), PAYD_WEBHOOK_TOO_OLD);
    assert_int_equal(check(SECRET, HEADER, BODY, T - 301), PAYD_WEBHOOK_TOO_OLD);
    assert_int_equal(payd_webhook_verify(SECRET, HEADER, BODY, strlen(BODY), 10, T + 11),
                     PAYD_WEBHOOK_TOO_OLD);
    assert_int_equal(payd_webhook_verify(SECRET, HEADER, BODY, strlen(BODY), 10, T + 10),
                     PAYD_WEBHOOK_OK);
}

static void test_malformed_headers(void **state)
{
    (void)state;
    const char *bad[] = {"",
                         "v1=" MAC,
                         "t=1796000000",
                         "t=abc,v1=" MAC,
                         "t=-5,v1=" MAC,
                         "t=1796000000,v1=xyz",
                         "t=1796000000,v1=" MAC "00"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(check(SECRET, bad[i], BODY, T), PAYD_WEBHOOK_MALFORMED);
    assert_int_equal(payd_webhook_verify(SECRET, NULL, BODY, strlen(BODY), 0, T),
                     PAYD_WEBHOOK_MALFORMED);
    assert_string_equal(payd_webhook_check_name(PAYD_WEBHOOK_TOO_OLD), "outside_tolerance");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sign_matches_the_reference_vector),
        cmocka_unit_test(test_a_good_delivery_verifies),
        cmocka_unit_test(test_body_timestamp_or_secret_changed_fail),
        cmocka_unit_test(test_outside_the_window_fails_even_with_a_good_mac),
        cmocka_unit_test(test_malformed_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

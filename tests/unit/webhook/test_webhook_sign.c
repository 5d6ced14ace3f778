/* The server's signature (src/webhook/signature.c) against the same independently computed
 * vector as the client's verifier (tests/unit/client/test_webhook.c), and the retry schedule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "webhook/delivery.h"
#include "webhook/signature.h"

static void test_signature_matches_the_reference_vector(void **state)
{
    (void)state;
    const char *body = "{\"id\":\"evt_1\"}";
    char out[128];
    webhook_sign("whsec_test", 1796000000, body, strlen(body), out, sizeof out);
    assert_string_equal(
        out, "t=1796000000,v1=f66de723c03bf01e9313eae58df6d62f9b79004655cf5c7b68b055a9b466b64a");
}

static void test_retry_schedule(void **state)
{
    (void)state;
    const int64_t minute = 60000, hour = 60 * minute;
    const int64_t expected[] = {minute,   5 * minute, 30 * minute, 2 * hour,
                                5 * hour, 10 * hour,  12 * hour,   12 * hour};
    for (int attempt = 1; attempt <= 8; attempt++)
        assert_int_equal(webhook_retry_delay_ms(attempt), expected[attempt - 1]);
    assert_int_equal(webhook_retry_delay_ms(1000), 12 * hour);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signature_matches_the_reference_vector),
        cmocka_unit_test(test_retry_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

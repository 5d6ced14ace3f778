/* Sealing secrets at rest: a round trip, a fresh nonce per seal, and a sealed text that does
 * not open under another key, another context, or once altered. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "core/seal.h"

static const uint8_t server_secret[32] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};

static void test_round_trip(void **state)
{
    (void)state;
    uint8_t key[SEAL_KEY_BYTES];
    seal_key_derive(server_secret, "webhook secrets v1", key);
    const char *plain = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef";
    char sealed[256], opened[128];
    assert_int_equal(seal_text(key, "webhook_endpoint:7", plain, sealed, sizeof sealed), 0);
    assert_true(seal_is_sealed(sealed));
    assert_null(strstr(sealed, "whsec_"));
    assert_true(strlen(sealed) + 1 <= seal_text_size(strlen(plain)));
    assert_int_equal(seal_open(key, "webhook_endpoint:7", sealed, opened, sizeof opened), 0);
    assert_string_equal(opened, plain);
}

static void test_each_seal_differs(void **state)
{
    (void)state;
    uint8_t key[SEAL_KEY_BYTES];
    seal_key_derive(server_secret, "webhook secrets v1", key);
    char a[256], b[256];
    assert_int_equal(seal_text(key, "c", "same", a, sizeof a), 0);
    assert_int_equal(seal_text(key, "c", "same", b, sizeof b), 0);
    assert_string_not_equal(a, b);
}

static void test_refuses_other_key_context_or_change(void **state)
{
    (void)state;
    uint8_t key[SEAL_KEY_BYTES], other[SEAL_KEY_BYTES];
    seal_key_derive(server_secret, "webhook secrets v1", key);
    seal_key_derive(server_secret, "another purpose", other);
    assert_memory_not_equal(key, other, SEAL_KEY_BYTES);
    assert_memory_not_equal(key, server_secret, SEAL_KEY_BYTES);
    char sealed[256], opened[128];
    assert_int_equal(seal_text(key, "webhook_endpoint:7", "whsec_x", sealed, sizeof sealed), 0);
    assert_int_equal(seal_open(other, "webhook_endpoint:7", sealed, opened, sizeof opened), -1);
    assert_int_equal(seal_open(key, "webhook_endpoint:8", sealed, opened, sizeof opened), -1);
    size_t last = strlen(sealed) - 2;
    sealed[last] = sealed[last] == 'A' ? 'B' : 'A';
    assert_int_equal(seal_open(key, "webhook_endpoint:7", sealed, opened, sizeof opened), -1);
    assert_int_equal(seal_open(key, "webhook_endpoint:7", "whsec_x", opened, sizeof opened), -1);
    assert_int_equal(seal_open(key, "c", SEAL_PREFIX "AAAA", opened, sizeof opened), -1);
}

static void test_short_buffers_are_refused(void **state)
{
    (void)state;
    uint8_t key[SEAL_KEY_BYTES];
    seal_key_derive(server_secret, "p", key);
    char sealed[256], small[4];
    assert_int_equal(seal_text(key, "c", "secret", small, sizeof small), -1);
    assert_int_equal(seal_text(key, "c", "secret", sealed, sizeof sealed), 0);
    assert_int_equal(seal_open(key, "c", sealed, small, sizeof small), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_each_seal_differs),
        cmocka_unit_test(test_refuses_other_key_context_or_change),
        cmocka_unit_test(test_short_buffers_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* http/address.c: an address's one spelling and the ranges of --trust-proxy. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "http/address.h"

static void test_one_spelling(void **state)
{
    (void)state;
    char out[INET6_ADDRSTRLEN];
    struct sockaddr_in6 mapped = {.sin6_family = AF_INET6};
    assert_int_equal(inet_pton(AF_INET6, "::ffff:10.0.0.7", &mapped.sin6_addr), 1);
    assert_true(address_text((struct sockaddr *)&mapped, out, sizeof out));
    assert_string_equal(out, "10.0.0.7"); /* an IPv4 client of an IPv6 listener */
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, "255.0.10.1", &v4.sin_addr), 1);
    assert_true(address_text((struct sockaddr *)&v4, out, sizeof out));
    assert_string_equal(out, "255.0.10.1");
    assert_true(address_normalise("2001:DB8:0:0::1 and more", 15, out, sizeof out));
    assert_string_equal(out, "2001:db8::1");
    assert_false(address_normalise("example.org", 11, out, sizeof out));
    assert_false(address_text((struct sockaddr *)&v4, out, 8)); /* no room */
}

static bool trusted(const trusted_range *r, size_t n, const char *peer)
{
    int family;
    uint8_t bits[16];
    if (!address_parse_binary(peer, &family, bits))
        return false;
    for (size_t i = 0; i < n; i++)
        if (trusted_range_contains(&r[i], family, bits))
            return true;
    return false;
}

static void test_trusted_ranges(void **state)
{
    (void)state;
    trusted_range r[4];
    size_t n = 0;
    char err[200];
    assert_true(trusted_ranges_parse(" 10.1.2.3/8, fd00::/8,::ffff:192.168.0.0/112 ", r, 4, &n, err,
                                     sizeof err));
    assert_int_equal(n, 3);
    assert_true(trusted(r, n, "10.200.0.1")); /* 10.1.2.3/8 means 10.0.0.0/8 */
    assert_true(trusted(r, n, "fd12::1"));
    assert_true(trusted(r, n, "192.168.9.9")); /* the mapped range is kept as IPv4 */
    assert_false(trusted(r, n, "11.0.0.1"));
    assert_false(trusted(r, n, "fe80::1"));
    n = 0;
    assert_false(trusted_ranges_parse("10.0.0.0/33", r, 4, &n, err, sizeof err));
    assert_non_null(strstr(err, "--trust-proxy"));
    n = 0;
    assert_false(trusted_ranges_parse("1.1.1.1,2.2.2.2,3.3.3.3", r, 2, &n, err, sizeof err));
    n = 0;
    assert_false(trusted_ranges_parse("proxy.internal", r, 4, &n, err, sizeof err));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_spelling),
        cmocka_unit_test(test_trusted_ranges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

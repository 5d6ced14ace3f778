/* ETag lists (api/common.c, etag_list_matches): If-None-Match compares weakly, If-Match strongly;
 * lists, "*", and the spaces around commas. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/common.h"

static void test_single_strong_tag(void **state)
{
    (void)state;
    assert_true(etag_list_matches("\"v1\"", "\"v1\"", true));
    assert_true(etag_list_matches("\"v1\"", "\"v1\"", false));
    assert_false(etag_list_matches("\"v2\"", "\"v1\"", true));
    /* the whole tag, not a prefix of it */
    assert_false(etag_list_matches("\"v10\"", "\"v1\"", true));
    assert_false(etag_list_matches("\"v1\"", "\"v10\"", true));
}

static void test_weak_tags(void **state)
{
    (void)state;
    /* weak comparison (If-None-Match) ignores W/; strong comparison never matches a weak tag */
    assert_true(etag_list_matches("W/\"v1\"", "\"v1\"", true));
    assert_false(etag_list_matches("W/\"v1\"", "\"v1\"", false));
    assert_false(etag_list_matches("W/\"v2\"", "\"v1\"", true));
    assert_true(etag_list_matches("W/\"v1\", \"v1\"", "\"v1\"", false));
}

static void test_lists(void **state)
{
    (void)state;
    assert_true(etag_list_matches("\"v1\",\"v2\",\"v3\"", "\"v2\"", true));
    assert_true(etag_list_matches("\"v1\",\"v2\",\"v3\"", "\"v3\"", false));
    assert_false(etag_list_matches("\"v1\",\"v2\"", "\"v3\"", true));
    assert_true(etag_list_matches("W/\"v1\", W/\"v2\"", "\"v2\"", true));
    /* a comma inside a quoted tag is part of the tag */
    assert_true(etag_list_matches("\"a,b\", \"v1\"", "\"v1\"", true));
    assert_false(etag_list_matches("\"a,b\"", "\"b\"", true));
}

static void test_star(void **state)
{
    (void)state;
    assert_true(etag_list_matches("*", "\"v1\"", true));
    assert_true(etag_list_matches("*", "\"v1\"", false));
    assert_true(etag_list_matches(" *", "\"v1\"", true));
    assert_true(etag_list_matches("\"v9\", *", "\"v1\"", true));
}

static void test_whitespace(void **state)
{
    (void)state;
    assert_true(etag_list_matches("  \"v1\"", "\"v1\"", true));
    assert_true(etag_list_matches("\"v0\" , \"v1\"", "\"v1\"", true));
    assert_true(etag_list_matches("\"v0\",   \"v1\"  ", "\"v1\"", true));
    assert_true(etag_list_matches(" , ,\"v1\",,", "\"v1\"", true));
    /* HTTP's optional white space is spaces and tabs */
    assert_true(etag_list_matches("\"v0\",\t\"v1\"", "\"v1\"", true));
}

static void test_empty_and_malformed(void **state)
{
    (void)state;
    assert_false(etag_list_matches("", "\"v1\"", true));
    assert_false(etag_list_matches("   ", "\"v1\"", true));
    assert_false(etag_list_matches(",", "\"v1\"", true));
    /* an unquoted or unterminated tag ends the list: nothing after it is read */
    assert_false(etag_list_matches("v1", "\"v1\"", true));
    assert_false(etag_list_matches("\"v1", "\"v1\"", true));
    assert_false(etag_list_matches("v0, \"v1\"", "\"v1\"", true));
    assert_false(etag_list_matches("W/v1", "\"v1\"", true));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_strong_tag),
        cmocka_unit_test(test_weak_tags),
        cmocka_unit_test(test_lists),
        cmocka_unit_test(test_star),
        cmocka_unit_test(test_whitespace),
        cmocka_unit_test(test_empty_and_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

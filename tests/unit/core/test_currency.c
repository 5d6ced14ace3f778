/* The currency table (core/currency.c): every active ISO 4217 code with its exponent, found in
 * any case, anything else refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/currency.h"

static int exponent_of(const char *text)
{
    const iso_currency *c = currency_find(text);
    assert_non_null(c);
    return c->exponent;
}

static void test_the_table_holds_every_active_code_once_in_order(void **state)
{
    (void)state;
    /* iso-codes' 181 (scripts/gen-currencies.py) and XCG, ZWG */
    assert_int_equal(currency_count(), 183);
    for (int i = 0; i < currency_count(); i++) {
        const iso_currency *c = currency_at(i);
        assert_int_equal(strlen(c->code), 3);
        for (int k = 0; k < 3; k++)
            assert_true(c->code[k] >= 'A' && c->code[k] <= 'Z');
        assert_true(c->exponent >= 0 && c->exponent <= 4);
        if (i > 0)
            assert_true(strcmp(currency_at(i - 1)->code, c->code) < 0);
        assert_ptr_equal(currency_find(c->code), c); /* the search finds every entry */
    }
    assert_null(currency_at(-1));
    assert_null(currency_at(currency_count()));
}

static void test_exponents(void **state)
{
    (void)state;
    assert_int_equal(exponent_of("USD"), 2);
    assert_int_equal(exponent_of("EUR"), 2);
    assert_int_equal(exponent_of("JPY"), 0);
    assert_int_equal(exponent_of("KRW"), 0);
    assert_int_equal(exponent_of("KWD"), 3);
    assert_int_equal(exponent_of("BHD"), 3);
    assert_int_equal(exponent_of("CLF"), 4);
    assert_int_equal(exponent_of("XAU"), 0); /* no minor unit: whole units */
    assert_int_equal(exponent_of("AED"), 2); /* the first */
    assert_int_equal(exponent_of("ZWL"), 2); /* the last */
}

static void test_any_case_in_upper_case_out(void **state)
{
    (void)state;
    char out[4] = "";
    assert_true(currency_normalize("usd", out));
    assert_string_equal(out, "USD");
    assert_true(currency_normalize("JpY", out));
    assert_string_equal(out, "JPY");
    assert_string_equal(currency_find("kwd")->code, "KWD");
}

static void test_refused(void **state)
{
    (void)state;
    const char *refused[] = {"QQQ", "ABC",  "",           "US",   "USDX", "US1",
                             "U D", "usd ", "\xc3\xa9UR", "\0SD", "ZZZ",  "AAA"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        assert_null(currency_find(refused[i]));
    assert_null(currency_find(NULL));
    char out[4] = "XYZ";
    assert_false(currency_normalize("QQQ", out));
    assert_string_equal(out, "XYZ"); /* untouched */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_table_holds_every_active_code_once_in_order),
        cmocka_unit_test(test_exponents),
        cmocka_unit_test(test_any_case_in_upper_case_out),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

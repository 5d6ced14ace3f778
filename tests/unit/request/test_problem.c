/* The problem table: every error has a status, a unique snake_case code, a title, and the
 * idempotency disposition §2 asks for. */
#include <ctype.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "request/problem.h"

static void test_every_error_is_complete(void **state)
{
    for (int e = ERR_NONE + 1; e < ERR_COUNT; e++) {
        const problem_def *p = problem_lookup((payd_error)e);
        assert_non_null(p->code);
        assert_non_null(p->title);
        assert_true(p->status >= 400 && p->status <= 599);
        for (const char *c = p->code; *c; c++)
            assert_true(islower((unsigned char)*c) || *c == '_');
        /* codes are unique, except the two faces of version_conflict (409 body, 412 If-Match) */
        for (int f = e + 1; f < ERR_COUNT; f++) {
            const problem_def *q = problem_lookup((payd_error)f);
            if (!strcmp(p->code, q->code))
                assert_string_equal(p->code, "version_conflict");
        }
        assert_ptr_equal(problem_by_code(p->code)->code, p->code);
    }
    assert_null(problem_by_code("no_such_code"));
}

static void test_contract_statuses(void **state)
{
    assert_int_equal(problem_lookup(ERR_UNAUTHORIZED)->status, 401);
    assert_int_equal(problem_lookup(ERR_RESOURCE_MISSING)->status, 404);
    assert_int_equal(problem_lookup(ERR_PAYLOAD_TOO_LARGE)->status, 413);
    assert_int_equal(problem_lookup(ERR_UNSUPPORTED_MEDIA_TYPE)->status, 415);
    assert_int_equal(problem_lookup(ERR_IDEMPOTENCY_KEY_REUSED)->status, 422);
    assert_int_equal(problem_lookup(ERR_REQUEST_IN_PROGRESS)->status, 409);
    assert_int_equal(problem_lookup(ERR_CARD_DECLINED)->status, 402);
    assert_int_equal(problem_lookup(ERR_PRECONDITION_FAILED)->status, 412);
    assert_int_equal(problem_lookup(ERR_RATE_LIMITED)->status, 429);
    assert_int_equal(problem_lookup(ERR_PROCESSOR_UNAVAILABLE)->status, 503);
    assert_string_equal(problem_lookup(ERR_INVALID_JSON)->code, "invalid_json");
    /* out of range falls back to the internal error, never NULL */
    assert_int_equal(problem_lookup(ERR_COUNT)->status, 500);
}

static void test_key_dispositions_follow_section_2(void **state)
{
    /* not stored, key released: validation, 401, 404, 413, 415, 429 */
    payd_error released[] = {ERR_INVALID_PARAMETER, ERR_MISSING_PARAMETER,
                             ERR_UNKNOWN_PARAMETER, ERR_INVALID_JSON,
                             ERR_UNAUTHORIZED,      ERR_RESOURCE_MISSING,
                             ERR_PAYLOAD_TOO_LARGE, ERR_UNSUPPORTED_MEDIA_TYPE,
                             ERR_RATE_LIMITED,      ERR_ORDER_MISMATCH};
    for (size_t i = 0; i < sizeof released / sizeof released[0]; i++)
        assert_int_equal(problem_lookup(released[i])->key, KEY_RELEASE);
    /* business outcomes are the operation's result */
    payd_error stored[] = {ERR_CARD_DECLINED,
                           ERR_DUPLICATE_PAYMENT,
                           ERR_ORDER_NOT_PAYABLE,
                           ERR_AMOUNT_EXCEEDS_REFUNDABLE,
                           ERR_PAYMENT_NOT_REFUNDABLE,
                           ERR_INSUFFICIENT_FUNDS,
                           ERR_OUT_OF_STOCK};
    for (size_t i = 0; i < sizeof stored / sizeof stored[0]; i++)
        assert_int_equal(problem_lookup(stored[i])->key, KEY_STORE);
    /* in doubt: resumable */
    assert_int_equal(problem_lookup(ERR_PROCESSOR_UNAVAILABLE)->key, KEY_UNLOCK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_error_is_complete),
        cmocka_unit_test(test_contract_statuses),
        cmocka_unit_test(test_key_dispositions_follow_section_2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

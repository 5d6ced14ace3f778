/* A hold's arithmetic (api/captures.c, hold_plan; docs/payments.md): what a capture or a release
 * moves, the payment's status after it, the refusals of §17, and the identity captured +
 * released + capturable = amount kept by every answer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "api/captures.h"

static hold_state held(int64_t capturable, int64_t captured, int64_t released, int64_t refunded,
                       int64_t count)
{
    hold_state h = {.capturable = capturable,
                    .captured = captured,
                    .released = released,
                    .refunded = refunded,
                    .capture_count = count};
    snprintf(h.status, sizeof h.status, "requires_capture");
    return h;
}

static void assert_identity(const hold_state *h, const hold_change *c)
{
    int64_t amount = h->capturable + h->captured + h->released;
    assert_int_equal(h->captured + c->captured + h->released + c->released + c->capturable, amount);
}

static void test_capture_all_by_default(void **state)
{
    (void)state;
    hold_state h = held(1000, 0, 0, 0, 0);
    hold_change c;
    assert_int_equal(hold_plan(&h, HOLD_CAPTURE, 0, true, &c), HOLD_OK);
    assert_int_equal(c.captured, 1000);
    assert_int_equal(c.released, 0);
    assert_int_equal(c.capturable, 0);
    assert_string_equal(c.status, "succeeded");
    assert_identity(&h, &c);
}

static void test_partial_then_final(void **state)
{
    (void)state;
    hold_state h = held(1000, 0, 0, 0, 0);
    hold_change c;
    assert_int_equal(hold_plan(&h, HOLD_CAPTURE, 300, false, &c), HOLD_OK);
    assert_int_equal(c.captured, 300);
    assert_int_equal(c.released, 0);
    assert_int_equal(c.capturable, 700);
    assert_string_equal(c.status, "requires_capture");
    h = held(700, 300, 0, 0, 1);
    assert_int_equal(hold_plan(&h, HOLD_CAPTURE, 200, true, &c), HOLD_OK);
    assert_int_equal(c.captured, 200);
    assert_int_equal(c.released, 500); /* the rest */
    assert_int_equal(c.capturable, 0);
    assert_string_equal(c.status, "succeeded");
    assert_identity(&h, &c);
}

static void test_release(void **state)
{
    (void)state;
    hold_state h = held(1000, 0, 0, 0, 0);
    hold_change c;
    assert_int_equal(hold_plan(&h, HOLD_RELEASE, 0, false, &c), HOLD_OK);
    assert_int_equal(c.released, 1000);
    assert_int_equal(c.captured, 0);
    assert_string_equal(c.status, "canceled");
    /* after a capture: succeeded with the rest released; after refunds of it, their status */
    h = held(600, 400, 0, 0, 1);
    assert_int_equal(hold_plan(&h, HOLD_RELEASE, 0, false, &c), HOLD_OK);
    assert_string_equal(c.status, "succeeded");
    assert_int_equal(c.released, 600);
    h = held(600, 400, 0, 100, 1);
    assert_int_equal(hold_plan(&h, HOLD_RELEASE, 0, false, &c), HOLD_OK);
    assert_string_equal(c.status, "partially_refunded");
    h = held(600, 400, 0, 400, 1);
    assert_int_equal(hold_plan(&h, HOLD_RELEASE, 0, false, &c), HOLD_OK);
    assert_string_equal(c.status, "refunded");
    assert_identity(&h, &c);
}

static void test_refusals(void **state)
{
    (void)state;
    hold_change c;
    hold_state h = held(100, 0, 0, 0, 0);
    assert_int_equal(hold_plan(&h, HOLD_CAPTURE, 101, true, &c), HOLD_EXCEEDS);
    assert_int_equal(c.captured + c.released, 0); /* nothing moves */
    h = held(50, 50, 0, 0, 50);
    assert_int_equal(hold_plan(&h, HOLD_CAPTURE, 1, false, &c), HOLD_TOO_MANY);
    /* the 50 captures bound captures only: the rest can still be released */
    assert_int_equal(hold_plan(&h, HOLD_RELEASE, 0, false, &c), HOLD_OK);
    h = held(50, 50, 0, 0, 49);
    assert_int_equal(hold_plan(&h, HOLD_CAPTURE, 1, false, &c), HOLD_OK);
    h = held(0, 100, 0, 0, 1);
    snprintf(h.status, sizeof h.status, "succeeded");
    assert_int_equal(hold_plan(&h, HOLD_CAPTURE, 0, true, &c), HOLD_NOT_CAPTURABLE);
    assert_int_equal(hold_plan(&h, HOLD_RELEASE, 0, false, &c), HOLD_NOT_CAPTURABLE);
    snprintf(h.status, sizeof h.status, "canceled");
    assert_int_equal(hold_plan(&h, HOLD_RELEASE, 0, false, &c), HOLD_NOT_CAPTURABLE);
    /* a status that says requires_capture with nothing left is not capturable either */
    h = held(0, 100, 0, 0, 1);
    assert_int_equal(hold_plan(&h, HOLD_CAPTURE, 0, true, &c), HOLD_NOT_CAPTURABLE);
}

static void test_identity_everywhere(void **state)
{
    (void)state;
    for (int64_t capturable = 1; capturable <= 12; capturable++)
        for (int64_t want = 0; want <= 13; want++)
            for (int final = 0; final <= 1; final++) {
                hold_state h = held(capturable, 12 - capturable, 0, 0, 3);
                hold_change c;
                hold_verdict v = hold_plan(&h, HOLD_CAPTURE, want, final, &c);
                if (want > capturable) {
                    assert_int_equal(v, HOLD_EXCEEDS);
                    continue;
                }
                assert_int_equal(v, HOLD_OK);
                assert_identity(&h, &c);
                assert_true(c.captured >= 1 && c.capturable >= 0 && c.released >= 0);
                assert_true(!final || c.capturable == 0);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capture_all_by_default),
        cmocka_unit_test(test_partial_then_final),
        cmocka_unit_test(test_release),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_identity_everywhere),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

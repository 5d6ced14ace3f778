/* The idempotency engine's judgement of a stored key (idem/verdict.c, §2): what a new request
 * with the same key gets, for every state, fingerprint, age and lock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "idem/verdict.h"

#define SECOND  1000000LL
#define TTL     (24 * 3600 * SECOND)
#define LOCK    (30 * SECOND)
#define NOW     (1800000000LL * SECOND)
#define MINE    "fp-of-this-request"
#define ANOTHER "fp-of-another-request"

static key_verdict judge(const char *state, const char *fp, int64_t claimed_ago, int64_t locked_ago)
{
    stored_key k = {state, fp, NOW - claimed_ago, NOW - locked_ago};
    return idem_judge(&k, MINE, NOW, TTL, LOCK);
}

static void test_completed_replays_its_answer(void **state)
{
    (void)state;
    assert_int_equal(judge("completed", MINE, SECOND, SECOND), KEY_REPLAY);
    assert_int_equal(judge("completed", MINE, TTL - SECOND, TTL), KEY_REPLAY);
}

static void test_another_request_under_the_key_is_refused(void **state)
{
    (void)state;
    assert_int_equal(judge("completed", ANOTHER, SECOND, SECOND), KEY_MISMATCH);
    assert_int_equal(judge("started", ANOTHER, SECOND, SECOND), KEY_MISMATCH);
    assert_int_equal(judge("in_doubt", ANOTHER, SECOND, SECOND), KEY_MISMATCH);
}

static void test_expired_key_is_a_new_operation(void **state)
{
    (void)state;
    /* past the TTL the key is free, whoever claimed it and with what */
    assert_int_equal(judge("completed", MINE, TTL + SECOND, TTL + SECOND), KEY_ABSENT);
    assert_int_equal(judge("completed", ANOTHER, TTL + SECOND, TTL + SECOND), KEY_ABSENT);
    assert_int_equal(judge("released", ANOTHER, TTL + SECOND, TTL + SECOND), KEY_ABSENT);
}

static void test_released_key_is_claimable_by_any_request(void **state)
{
    (void)state;
    assert_int_equal(judge("released", MINE, SECOND, SECOND), KEY_RELEASED);
    assert_int_equal(judge("released", ANOTHER, SECOND, SECOND), KEY_RELEASED);
}

static void test_live_holder_makes_it_busy_and_a_dead_one_resumable(void **state)
{
    (void)state;
    assert_int_equal(judge("started", MINE, SECOND, SECOND), KEY_BUSY);
    assert_int_equal(judge("started", MINE, LOCK - 1, LOCK - 1), KEY_BUSY);
    /* the lock timed out: the holder is presumed dead, a retry takes over */
    assert_int_equal(judge("started", MINE, LOCK + SECOND, LOCK + SECOND), KEY_RESUMABLE);
    /* a renewed lock counts from its renewal, not from the claim */
    assert_int_equal(judge("started", MINE, 10 * LOCK, SECOND), KEY_BUSY);
}

static void test_in_doubt_is_resumable_at_once(void **state)
{
    (void)state;
    /* in doubt (left by a crash or a failed answer): the client's own retry may resume it at
     * once; only the recoverer waits a lock timeout (idem/recovery.c) */
    assert_int_equal(judge("in_doubt", MINE, SECOND, 0), KEY_RESUMABLE);
    /* a started key past its TTL but still locked is not free: it is in flight */
    assert_int_equal(judge("started", MINE, TTL + SECOND, SECOND), KEY_BUSY);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_completed_replays_its_answer),
        cmocka_unit_test(test_another_request_under_the_key_is_refused),
        cmocka_unit_test(test_expired_key_is_a_new_operation),
        cmocka_unit_test(test_released_key_is_claimable_by_any_request),
        cmocka_unit_test(test_live_holder_makes_it_busy_and_a_dead_one_resumable),
        cmocka_unit_test(test_in_doubt_is_resumable_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

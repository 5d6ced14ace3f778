/* GCRA rate limiting (§11) with an injected clock: exact quotas and timings, the table's eviction
 * and memory bound, and a thread-safety smoke test. Includes gcra.c to check its keyed hash. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>

#include "../../../src/core/gcra.c"

#define MS 1000000LL
#define S  1000000000LL

static void test_policy_from_rate(void **state)
{
    gcra_policy p = gcra_policy_from_rate(100, 1000, 0);
    assert_int_equal(p.emission_interval_ns, 10 * MS);
    assert_int_equal(p.burst, 100);
    p = gcra_policy_from_rate(6000, 60000, 0);
    assert_int_equal(p.emission_interval_ns, 10 * MS);
    assert_int_equal(p.burst, 100);
    p = gcra_policy_from_rate(1000, 3600000, 0); /* under one per second: burst is still 1 */
    assert_int_equal(p.emission_interval_ns, 3600 * MS);
    assert_int_equal(p.burst, 1);
    p = gcra_policy_from_rate(100, 1000, 7);
    assert_int_equal(p.burst, 7);
    p = gcra_policy_from_rate(100, 1000, -3);
    assert_int_equal(p.burst, 100);
    p = gcra_policy_from_rate(0, 0, 0); /* nonsense is clamped, never a zero interval */
    assert_int_equal(p.emission_interval_ns, MS);
    assert_int_equal(p.burst, 1000);
    p = gcra_policy_from_rate(INT64_MAX, 1000, 0);
    assert_int_equal(p.emission_interval_ns, 1);
    assert_int_equal(p.burst, INT64_MAX);
    p = gcra_policy_from_rate(1, INT64_MAX, 0);
    assert_true(p.emission_interval_ns > 0);
    assert_int_equal(p.burst, 1);
}

static void test_exact_burst(void **state)
{
    gcra_policy p = {.emission_interval_ns = 10 * MS, .burst = 10};
    int64_t tat = 0;
    for (int i = 0; i < 10; i++) {
        gcra_decision d = gcra_apply(&tat, &p, 0);
        assert_true(d.allowed);
        assert_int_equal(d.limit, 10);
        assert_int_equal(d.remaining, 9 - i);
        assert_int_equal(d.retry_after_ns, 0);
    }
    gcra_decision d = gcra_apply(&tat, &p, 0);
    assert_false(d.allowed);
    assert_int_equal(d.remaining, 0);
    assert_int_equal(d.limit, 10);
}

static void test_steady_state(void **state)
{
    gcra_policy p = {.emission_interval_ns = 10 * MS, .burst = 3};
    int64_t tat = 0;
    for (int64_t k = 0; k < 100000; k++) {
        gcra_decision d = gcra_apply(&tat, &p, k * 10 * MS);
        assert_true(d.allowed);
        assert_int_equal(d.remaining, 2); /* never eats into the burst */
        assert_int_equal(d.reset_after_ns, 10 * MS);
    }
    /* After the burst is spent, exactly one request per interval still gets through. */
    tat = 0;
    for (int i = 0; i < 3; i++)
        assert_true(gcra_apply(&tat, &p, 0).allowed);
    for (int64_t k = 1; k < 1000; k++) {
        assert_false(gcra_apply(&tat, &p, k * 10 * MS - 1).allowed);
        gcra_decision d = gcra_apply(&tat, &p, k * 10 * MS);
        assert_true(d.allowed);
        assert_int_equal(d.remaining, 0);
        assert_false(gcra_apply(&tat, &p, k * 10 * MS).allowed);
    }
}

/* The spec's example: 5/s, so a burst of 5 and one more every 200 ms. */
static void test_five_per_second(void **state)
{
    gcra_policy p = gcra_policy_from_rate(5, 1000, 0);
    assert_int_equal(p.emission_interval_ns, 200 * MS);
    assert_int_equal(p.burst, 5);
    int64_t tat = 0;
    for (int i = 0; i < 5; i++) {
        gcra_decision d = gcra_apply(&tat, &p, 0);
        assert_true(d.allowed);
        assert_int_equal(d.remaining, 4 - i);
        assert_int_equal(d.reset_after_ns, (i + 1) * 200 * MS);
    }
    gcra_decision d = gcra_apply(&tat, &p, 0);
    assert_false(d.allowed);
    assert_int_equal(d.retry_after_ns, 200 * MS);
    assert_int_equal(d.reset_after_ns, 1 * S);

    d = gcra_apply(&tat, &p, 150 * MS);
    assert_false(d.allowed);
    assert_int_equal(d.retry_after_ns, 50 * MS);
    assert_int_equal(d.reset_after_ns, 850 * MS);

    d = gcra_apply(&tat, &p, 200 * MS - 1);
    assert_false(d.allowed);
    assert_int_equal(d.retry_after_ns, 1);

    d = gcra_apply(&tat, &p, 200 * MS); /* exactly when retry_after said */
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 0);
    assert_int_equal(d.reset_after_ns, 1 * S);
    assert_false(gcra_apply(&tat, &p, 200 * MS).allowed);

    /* Idle for 600 ms earns three requests back. */
    d = gcra_apply(&tat, &p, 800 * MS);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 2);
    /* Idle long enough and the quota is full again, not more. */
    d = gcra_apply(&tat, &p, 60 * S);
    assert_true(d.allowed);
    assert_int_equal(d.remaining, 4);
    assert_int_equal(d.reset_after_ns, 200 * MS);
}

/* §11's header example: 100/s after 25 requests shows 75 remaining, full again in 250 ms. */
static void test_remaining_and_reset(void **state)
{
    gcra_policy p = gcra_policy_from_rate(100, 1000, 0);
    int64_t tat = 0;
    gcra_decision d;
    for (int i = 0; i < 25; i++)
        d = gcra_apply(&tat, &p, 0);
    assert_true(d.allowed);
    assert_int_equal(d.limit, 100);
    assert_int_equal(d.remaining, 75);
    assert_int_equal(d.reset_after_ns, 250 * MS);
    /* 35 ms later three and a half requests are earned back: the half does not count yet */
    d = gcra_apply(&tat, &p, 35 * MS);
    assert_int_equal(d.remaining, 77);
    assert_int_equal(d.reset_after_ns, 225 * MS);
}

static void test_denied_costs_nothing(void **state)
{
    gcra_policy p = {.emission_interval_ns = 100 * MS, .burst = 2};
    int64_t tat = 0;
    assert_true(gcra_apply(&tat, &p, 0).allowed);
    assert_true(gcra_apply(&tat, &p, 0).allowed);
    int64_t before = tat;
    for (int i = 0; i < 1000; i++)
        assert_false(gcra_apply(&tat, &p, 50 * MS).allowed);
    assert_int_equal(tat, before);
    assert_true(gcra_apply(&tat, &p, 100 * MS).allowed);
}

static void test_extremes_do_not_wrap(void **state)
{
    gcra_policy huge = {.emission_interval_ns = INT64_MAX / 2, .burst = INT64_MAX};
    int64_t tat = 0;
    gcra_decision d = gcra_apply(&tat, &huge, 1000);
    assert_true(d.allowed);
    assert_true(d.remaining >= 0);
    gcra_policy bad = {.emission_interval_ns = 0, .burst = 0}; /* treated as 1 ns, burst 1 */
    tat = 0;
    assert_true(gcra_apply(&tat, &bad, 5).allowed);
    assert_false(gcra_apply(&tat, &bad, 5).allowed);
}

static void test_table_basics(void **state)
{
    assert_null(gcra_table_create(0, 10));
    assert_null(gcra_table_create(10, 0));
    gcra_table *t = gcra_table_create(8, 100);
    assert_non_null(t);
    gcra_policy p = {.emission_interval_ns = 10 * MS, .burst = 3};
    char key[16] = "usr_1";
    for (int i = 0; i < 3; i++)
        assert_true(gcra_check(t, key, &p, 0).allowed);
    strcpy(key, "usr_2"); /* the table kept its own copy of "usr_1" */
    assert_true(gcra_check(t, key, &p, 0).allowed);
    assert_false(gcra_check(t, "usr_1", &p, 0).allowed);
    assert_int_equal(gcra_size(t), 2);
    gcra_table_free(t);
    gcra_table_free(NULL);
}

static void test_evict_idle(void **state)
{
    gcra_table *t = gcra_table_create(4, 100);
    gcra_policy p = {.emission_interval_ns = 10 * MS, .burst = 5};
    char key[32];
    for (int i = 0; i < 50; i++) {
        snprintf(key, sizeof key, "k%d", i);
        /* key i makes i % 5 + 1 requests at t=0, so its TAT is (i % 5 + 1) * 10 ms */
        for (int r = 0; r <= i % 5; r++)
            assert_true(gcra_check(t, key, &p, 0).allowed);
    }
    assert_int_equal(gcra_size(t), 50);
    assert_int_equal(gcra_evict_idle(t, 10 * MS - 1), 0);
    assert_int_equal(gcra_evict_idle(t, 10 * MS), 10); /* TAT == now: the quota is full */
    assert_int_equal(gcra_size(t), 40);
    assert_int_equal(gcra_evict_idle(t, 30 * MS), 20);
    /* forgetting an idle key changed nothing: it gets its full burst */
    gcra_decision d = gcra_check(t, "k0", &p, 30 * MS);
    assert_int_equal(d.remaining, 4);
    /* a key that is not idle was kept with its state */
    d = gcra_check(t, "k4", &p, 30 * MS);
    assert_int_equal(d.remaining, 2); /* TAT 50 ms, now 30 ms: 2 spent, this one is the third */
    assert_int_equal(gcra_evict_idle(t, 1 * S), 21);
    assert_int_equal(gcra_size(t), 0);
    gcra_table_free(t);
}

static void test_full_stripe(void **state)
{
    /* One stripe of four keys, so which keys are evicted is predictable. */
    gcra_table *t = gcra_table_create(1, 4);
    gcra_policy p = {.emission_interval_ns = 10 * MS, .burst = 5};
    for (int i = 0; i < 4; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", i);
        assert_true(gcra_check(t, key, &p, i).allowed); /* TAT of ki: 10 ms + i ns */
    }
    /* Full and nothing idle: the oldest TAT (k0) goes. */
    assert_true(gcra_check(t, "k4", &p, 4).allowed);
    assert_int_equal(gcra_size(t), 4);
    assert_int_equal(gcra_check(t, "k1", &p, 5).remaining, 3); /* remembered: second request */
    assert_int_equal(gcra_size(t), 4);
    assert_int_equal(gcra_check(t, "k0", &p, 5).remaining, 4); /* forgotten: looks new (lenient) */
    assert_int_equal(gcra_size(t), 4); /* k0 came back in place of k2, now the oldest */
    assert_int_equal(gcra_check(t, "k1", &p, 6).remaining, 2);
    assert_int_equal(gcra_check(t, "k2", &p, 6).remaining, 4);

    /* Full with idle keys: all idle ones go, and nothing else. */
    gcra_table_free(t);
    t = gcra_table_create(1, 4);
    for (int i = 0; i < 3; i++) {
        char key[8];
        snprintf(key, sizeof key, "idle%d", i);
        assert_true(gcra_check(t, key, &p, 0).allowed); /* TAT 10 ms */
    }
    assert_true(gcra_check(t, "busy", &p, 15 * MS).allowed); /* TAT 25 ms */
    assert_true(gcra_check(t, "new", &p, 15 * MS).allowed);
    assert_int_equal(gcra_size(t), 2);
    assert_int_equal(gcra_check(t, "busy", &p, 15 * MS).remaining, 3);
    gcra_table_free(t);
}

static void test_memory_bound(void **state)
{
    gcra_table *t = gcra_table_create(16, 64);
    gcra_policy p = gcra_policy_from_rate(100, 1000, 0);
    char key[32];
    /* 100k distinct keys, all active at a frozen clock: the table never exceeds its bound, and
     * every new key is allowed (forgetting can only be lenient). */
    for (int i = 0; i < 100000; i++) {
        snprintf(key, sizeof key, "203.0.113.%d:%d", i % 256, i);
        assert_true(gcra_check(t, key, &p, 0).allowed);
        assert_true(gcra_size(t) <= 16 * 64);
    }
    size_t full = gcra_size(t);
    assert_true(full > 16 * 64 / 2); /* the hash spreads keys over the stripes */
    /* 100k more keys one interval apart: idle keys make room, the table stays bounded */
    for (int i = 0; i < 100000; i++) {
        snprintf(key, sizeof key, "2001:db8::%x", i);
        assert_true(gcra_check(t, key, &p, (int64_t)i * 10 * MS).allowed);
    }
    assert_true(gcra_size(t) <= 16 * 64);
    size_t left = gcra_size(t);
    assert_int_equal(gcra_evict_idle(t, INT64_MAX), left);
    assert_int_equal(gcra_size(t), 0);
    gcra_table_free(t);
}

#define THREADS      4
#define PER_THREAD   5000
#define SHARED_BURST 100

typedef struct {
    gcra_table *t;
    int allowed;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    gcra_policy pol = {.emission_interval_ns = 10 * MS, .burst = SHARED_BURST};
    char key[16];
    for (int i = 0; i < PER_THREAD; i++) {
        if (gcra_check(a->t, "usr_shared", &pol, 42).allowed)
            a->allowed++;
        snprintf(key, sizeof key, "k%d", i % 300); /* other keys in the same stripes */
        gcra_check(a->t, key, &pol, 42);
    }
    return NULL;
}

static void test_threads_share_one_quota(void **state)
{
    gcra_table *t = gcra_table_create(4, 1000);
    pthread_t th[THREADS];
    worker_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (worker_arg){t, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(th[i], NULL);
        total += args[i].allowed;
    }
    assert_int_equal(total, SHARED_BURST);
    assert_int_equal(gcra_size(t), 301);
    gcra_table_free(t);
}

static void test_siphash_vectors(void **state)
{
    /* From the SipHash paper: key 00..0f, messages 00 01 .. (n-1). */
    uint8_t msg[64];
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    uint64_t k0 = 0x0706050403020100ULL, k1 = 0x0f0e0d0c0b0a0908ULL;
    assert_true(siphash24(msg, 0, k0, k1) == 0x726fdb47dd0e0e31ULL);
    assert_true(siphash24(msg, 1, k0, k1) == 0x74f839c593dc67fdULL);
    assert_true(siphash24(msg, 8, k0, k1) == 0x93f5f5799a932462ULL);
    assert_true(siphash24(msg, 15, k0, k1) == 0xa129ca6149be45e5ULL);
    assert_true(siphash24(msg, 63, k0, k1) == 0x958a324ceb064572ULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_from_rate),     cmocka_unit_test(test_exact_burst),
        cmocka_unit_test(test_steady_state),         cmocka_unit_test(test_five_per_second),
        cmocka_unit_test(test_remaining_and_reset),  cmocka_unit_test(test_denied_costs_nothing),
        cmocka_unit_test(test_extremes_do_not_wrap), cmocka_unit_test(test_table_basics),
        cmocka_unit_test(test_evict_idle),           cmocka_unit_test(test_full_stripe),
        cmocka_unit_test(test_memory_bound),         cmocka_unit_test(test_threads_share_one_quota),
        cmocka_unit_test(test_siphash_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Counters per holder (connections per client address, requests per API key): exact when takes
 * and gives race on many threads, and a holder's entry gone once its count is back to zero. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/holder_count.h"

static void test_counts_per_holder_and_frees_at_zero(void **state)
{
    (void)state;
    holder_count *t = holder_count_new();
    assert_int_equal(holder_count_take(t, "10.0.0.1", 8), 1);
    assert_int_equal(holder_count_take(t, "10.0.0.1", 8), 2);
    assert_int_equal(holder_count_take(t, "10.0.0.2", 8), 1);
    assert_int_equal(holder_count_holders(t), 2);
    holder_count_give(t, "10.0.0.1", 8);
    assert_int_equal(holder_count_of(t, "10.0.0.1", 8), 1);
    holder_count_give(t, "10.0.0.1", 8);
    holder_count_give(t, "10.0.0.2", 8);
    assert_int_equal(holder_count_holders(t), 0);
    assert_int_equal(holder_count_of(t, "10.0.0.1", 8), 0);
    holder_count_give(t, "10.0.0.3", 8); /* a give without a take changes nothing */
    assert_int_equal(holder_count_holders(t), 0);
    holder_count_free(t);
}

typedef struct racer {
    holder_count *t;
    int id;
} racer;

/* Each thread opens and closes connections for 16 shared addresses, out of step with the others,
 * so takes and gives of one address interleave on every thread. */
static void *race(void *arg)
{
    racer *r = arg;
    char key[16];
    for (int round = 0; round < 20000; round++) {
        int n = snprintf(key, sizeof key, "a%d", (round + r->id) % 16);
        /* two takes then two gives: the count of one address goes up and down on every thread */
        holder_count_take(r->t, key, (size_t)n);
        holder_count_take(r->t, key, (size_t)n);
        holder_count_give(r->t, key, (size_t)n);
        holder_count_give(r->t, key, (size_t)n);
    }
    return NULL;
}

static void test_exact_under_races(void **state)
{
    (void)state;
    holder_count *t = holder_count_new();
    holder_count_take(t, "kept", 4);
    pthread_t threads[8];
    racer r[8];
    for (int i = 0; i < 8; i++) {
        r[i] = (racer){t, i};
        pthread_create(&threads[i], NULL, race, &r[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(threads[i], NULL);
    assert_int_equal(holder_count_holders(t), 1);
    assert_int_equal(holder_count_of(t, "kept", 4), 1);
    holder_count_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_per_holder_and_frees_at_zero),
        cmocka_unit_test(test_exact_under_races),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The CPU count the thread pools size to: the process's affinity mask, not the machine's. */
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "core/cpus.h"

static void test_counts_the_affinity_mask(void **state)
{
    (void)state;
    cpu_set_t allowed;
    assert_int_equal(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    assert_int_equal(cpus_available(), CPU_COUNT(&allowed));

    /* pinned to one of its CPUs, as taskset -c N would: one */
    int first = 0;
    while (!CPU_ISSET(first, &allowed))
        first++;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    int pinned = cpus_available();
    assert_int_equal(sched_setaffinity(0, sizeof allowed, &allowed), 0);
    assert_int_equal(pinned, 1);
    assert_int_equal(cpus_available(), CPU_COUNT(&allowed));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_the_affinity_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

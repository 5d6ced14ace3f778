/* Snowflake ids: text form, decoding, ordering, uniqueness across threads, and a clock that
 * goes backwards or cannot keep up. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"

/* A clock the test moves by hand. */
typedef struct {
    int64_t ms;
} fake_clock;

static int64_t fake_now(void *ctx)
{
    return ((fake_clock *)ctx)->ms;
}

static const int64_t T0 = PAYD_EPOCH_MS + 86400000LL; /* one day after the id epoch */

/* A millisecond's first id bounds the ids of that millisecond and after from below, and the
 * ids before it from above, whatever node and sequence made them. */
static void test_first_id_of_a_millisecond(void **state)
{
    (void)state;
    int64_t ms = PAYD_EPOCH_MS + 123456789;
    int64_t first = id_first_of_ms(ms);
    assert_int_equal(id_decode((uint64_t)first).unix_ms, ms);
    assert_int_equal(id_decode((uint64_t)first).node_id, 0);
    assert_int_equal(id_decode((uint64_t)first).sequence, 0);
    assert_int_equal(id_decode((uint64_t)first - 1).unix_ms, ms - 1);
    assert_int_equal(id_first_of_ms(PAYD_EPOCH_MS - 5), 0);
    assert_int_equal(id_first_of_ms(PAYD_EPOCH_MS + (INT64_C(1) << 41)), INT64_MAX);
}

static void test_known_vectors(void **state)
{
    char s[ID_STR_MAX];
    id_format(0, "pay", s);
    assert_string_equal(s, "pay_0000000000000");
    id_format(1, "pay", s);
    assert_string_equal(s, "pay_0000000000001");
    id_format(31, "pay", s);
    assert_string_equal(s, "pay_000000000000z");
    id_format(32, "pay", s);
    assert_string_equal(s, "pay_0000000000010");
    id_format(UINT64_MAX, "acct", s);
    assert_string_equal(s, "acct_fzzzzzzzzzzzz");
    /* 1000 ms after the epoch, node 1, sequence 0 */
    id_format(4194308096ULL, "tr", s);
    assert_string_equal(s, "tr_0000003x00400");
    /* 2026-11-29T..., node 513, sequence 4095 */
    id_format(120608729860153343ULL, "ord", s);
    assert_string_equal(s, "ord_03b3x00t207zz");
}

static void test_round_trip(void **state)
{
    static const char *prefixes[] = {"usr", "acct", "pay", "re", "ord", "tr", "prod", "rsv", "txn"};
    uint64_t edges[] = {0, 1, 31, 32, 1ULL << 62, (1ULL << 63) - 1, 1ULL << 63, UINT64_MAX};
    char s[ID_STR_MAX];
    uint64_t back;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        id_format(edges[i], "pay", s);
        assert_int_equal(strlen(s), 17);
        assert_int_equal(id_parse(s, "pay", &back), 0);
        assert_true(back == edges[i]);
    }
    srand(7);
    for (int i = 0; i < 100000; i++) {
        uint64_t v = (uint64_t)rand() << 62 ^ (uint64_t)rand() << 31 ^ (uint64_t)rand();
        const char *prefix = prefixes[i % 8];
        id_format(v, prefix, s);
        assert_int_equal(id_parse(s, prefix, &back), 0);
        assert_true(back == v);
    }
}

static void test_format_rejects_bad_prefix(void **state)
{
    char s[ID_STR_MAX];
    id_format(5, "abcdefghi", s); /* ID_PREFIX_MAX chars: fits exactly */
    assert_string_equal(s, "abcdefghi_0000000000005");
    id_format(5, "abcdefghij", s);
    assert_string_equal(s, "");
    id_format(5, "", s);
    assert_string_equal(s, "");
    id_format(5, NULL, s);
    assert_string_equal(s, "");
}

static void test_parse_rejects(void **state)
{
    static const char *bad[] = {
        "",
        "pay",
        "pay_",
        "pay0000000000000",   /* no separator */
        "pay-0000000000000",  /* wrong separator */
        "acct_0000000000000", /* another prefix */
        "pa_0000000000000",   /* a prefix of the prefix */
        "payy_0000000000000", /* the prefix plus more */
        "PAY_0000000000000",  /* uppercase prefix */
        "pay_000000000000",   /* 12 digits */
        "pay_00000000000000", /* 14 digits */
        "pay_000000000000A",  /* uppercase digit */
        "pay_000000000000i",  /* not in the alphabet: i l o u */
        "pay_000000000000l",
        "pay_000000000000o",
        "pay_000000000000u",
        "pay_000000000000-",
        "pay_g000000000000", /* first digit 16: would need a 65th bit */
        "pay_z000000000000",
        " pay_0000000000000", /* white space */
        "pay_0000000000000 ",
        "pay_0000000000000\n",
        "pay_00000000 00000",
        "pay__0000000000000",
    };
    uint64_t v = 42;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (id_parse(bad[i], "pay", &v) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_true(v == 42); /* untouched on failure */
    }
    assert_int_equal(id_parse(NULL, "pay", &v), -1);
    assert_int_equal(id_parse("pay_0000000000000", NULL, &v), -1);
    assert_int_equal(id_parse("_0000000000000", "", &v), -1);
    assert_int_equal(id_parse("pay_f000000000000", "pay", &v), 0); /* highest first digit */
}

static void test_init_node_range(void **state)
{
    id_generator g;
    assert_int_equal(id_generator_init(&g, -1, NULL, NULL), -1);
    assert_int_equal(id_generator_init(&g, 1024, NULL, NULL), -1);
    assert_int_equal(id_generator_init(&g, 0, NULL, NULL), 0);
    assert_int_equal(id_generator_init(&g, 1023, NULL, NULL), 0);
    assert_int_equal(g.max_drift_ms, 5000);
}

static void test_decode(void **state)
{
    fake_clock clk = {T0};
    id_generator g;
    assert_int_equal(id_generator_init(&g, 513, fake_now, &clk), 0);
    uint64_t a, b;
    assert_int_equal(id_next(&g, &a), 0);
    assert_int_equal(id_next(&g, &b), 0);
    id_parts p = id_decode(a);
    assert_int_equal(p.unix_ms, T0);
    assert_int_equal(p.node_id, 513);
    assert_int_equal(p.sequence, 0);
    assert_int_equal(id_decode(b).sequence, 1);
    assert_true(a >> 63 == 0); /* issued ids fit a signed 64-bit column */

    p = id_decode(120608729860153343ULL);
    assert_int_equal(p.unix_ms, 1795980962000LL);
    assert_int_equal(p.node_id, 513);
    assert_int_equal(p.sequence, 4095);
    p = id_decode(0);
    assert_int_equal(p.unix_ms, PAYD_EPOCH_MS);
}

static void test_ordering_real_clock(void **state)
{
    id_generator g;
    assert_int_equal(id_generator_init(&g, 7, NULL, NULL), 0);
    uint64_t prev;
    char prev_s[ID_STR_MAX], s[ID_STR_MAX];
    assert_int_equal(id_next(&g, &prev), 0);
    id_format(prev, "pay", prev_s);
    for (int i = 0; i < 20000; i++) {
        uint64_t id;
        assert_int_equal(id_next(&g, &id), 0);
        id_format(id, "pay", s);
        assert_true(id > prev);
        assert_true(strcmp(s, prev_s) > 0);
        prev = id;
        memcpy(prev_s, s, sizeof s);
    }
}

#define THREADS        4
#define IDS_PER_THREAD 25000

typedef struct {
    id_generator *g;
    uint64_t *out;
} worker_arg;

static void *worker(void *p)
{
    worker_arg *a = p;
    for (int i = 0; i < IDS_PER_THREAD; i++)
        if (id_next(a->g, &a->out[i]) != 0)
            a->out[i] = 0; /* 0 is never issued after the epoch: counted as a failure below */
    return NULL;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static void test_threads_distinct(void **state)
{
    id_generator g;
    assert_int_equal(id_generator_init(&g, 3, NULL, NULL), 0);
    uint64_t *ids = calloc(THREADS * IDS_PER_THREAD, sizeof *ids);
    assert_non_null(ids);
    pthread_t th[THREADS];
    worker_arg args[THREADS];
    for (int i = 0; i < THREADS; i++) {
        args[i] = (worker_arg){&g, ids + i * IDS_PER_THREAD};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    /* each thread saw its own ids strictly increase */
    for (int t = 0; t < THREADS; t++)
        for (int i = 1; i < IDS_PER_THREAD; i++)
            assert_true(args[t].out[i] > args[t].out[i - 1]);
    qsort(ids, THREADS * IDS_PER_THREAD, sizeof *ids, cmp_u64);
    assert_true(ids[0] != 0);
    for (int i = 1; i < THREADS * IDS_PER_THREAD; i++)
        assert_true(ids[i] != ids[i - 1]);
    free(ids);
}

static void test_clock_goes_back(void **state)
{
    fake_clock clk = {T0};
    id_generator g;
    assert_int_equal(id_generator_init(&g, 1, fake_now, &clk), 0);
    uint64_t prev, id;
    assert_int_equal(id_next(&g, &prev), 0);

    /* Back one second: keep issuing from the last timestamp, still increasing. */
    clk.ms = T0 - 1000;
    for (int i = 0; i < 100; i++) {
        assert_int_equal(id_next(&g, &id), 0);
        assert_true(id > prev);
        assert_int_equal(id_decode(id).unix_ms, T0);
        prev = id;
    }
    /* Exactly max_drift behind is still fine; one ms more is refused, and changes nothing. */
    clk.ms = T0 - 5000;
    assert_int_equal(id_next(&g, &id), 0);
    assert_true(id > prev);
    prev = id;
    clk.ms = T0 - 5001;
    assert_int_equal(id_next(&g, &id), -1);
    clk.ms = T0 - 3600000;
    assert_int_equal(id_next(&g, &id), -1);
    assert_int_equal(g.last_ms, T0);

    /* Once the clock catches up, ids resume above everything issued. */
    clk.ms = T0;
    assert_int_equal(id_next(&g, &id), 0);
    assert_true(id > prev);
    prev = id;
    clk.ms = T0 + 1;
    assert_int_equal(id_next(&g, &id), 0);
    assert_true(id > prev);
    assert_int_equal(id_decode(id).unix_ms, T0 + 1);
    assert_int_equal(id_decode(id).sequence, 0);
}

/* A leased node id: ids only before the lease's bound, again once a renewal moves it. */
static void test_lease_bound(void **state)
{
    fake_clock clk = {T0};
    id_generator g;
    assert_int_equal(id_generator_init(&g, 0, fake_now, &clk), 0);
    id_generator_set_node(&g, 42);
    id_generator_set_lease_until(&g, T0 + 10);
    uint64_t id, prev;
    assert_true(id_generator_leased(&g));
    assert_int_equal(id_next(&g, &prev), 0);
    assert_int_equal(id_decode(prev).node_id, 42);
    clk.ms = T0 + 9;
    assert_int_equal(id_next(&g, &id), 0);
    clk.ms = T0 + 10;
    assert_false(id_generator_leased(&g)); /* what /readyz reports */
    assert_int_equal(id_next(&g, &id), ID_LEASE_LAPSED);
    clk.ms = T0 + 5000;
    assert_int_equal(id_next(&g, &id), ID_LEASE_LAPSED);
    id_generator_set_lease_until(&g, T0 + 20000);
    assert_true(id_generator_leased(&g));
    assert_int_equal(id_next(&g, &id), 0);
    assert_true(id > prev);
}

/* The node id's high-water mark: nothing stamped after the mark stored, nothing at or before
 * the mark found when the id was taken, even with the clock behind it. */
static void test_mark_and_floor(void **state)
{
    fake_clock clk = {T0};
    id_generator g;
    assert_int_equal(id_generator_init(&g, 3, fake_now, &clk), 0);
    assert_true(id_generator_last_ms(&g) == INT64_MIN);
    id_generator_floor(&g, T0 + 2000); /* issued up to 2 s ahead of this clock before */
    id_generator_set_mark(&g, T0 + 5000);
    uint64_t id, prev = 0;
    for (int i = 0; i < 5000; i++) { /* the clock stands still: ms are borrowed past the floor */
        assert_int_equal(id_next(&g, &id), 0);
        assert_true(id_decode(id).unix_ms > T0 + 2000);
        assert_true(id > prev);
        prev = id;
    }
    assert_int_equal(id_decode(id).unix_ms, T0 + 2002);
    assert_true(id_generator_last_ms(&g) == T0 + 2002);
    clk.ms = T0 + 5000;
    assert_int_equal(id_next(&g, &id), 0);
    assert_int_equal(id_decode(id).unix_ms, T0 + 5000);
    assert_true(id_generator_leased(&g));
    clk.ms = T0 + 5001; /* past the mark: until a renewal moves it */
    assert_false(id_generator_leased(&g));
    assert_int_equal(id_next(&g, &id), ID_LEASE_LAPSED);
    id_generator_set_mark(&g, T0 + 10000);
    assert_int_equal(id_next(&g, &id), 0);
    assert_int_equal(id_decode(id).unix_ms, T0 + 5001);
    id_generator_floor(&g, T0); /* a floor never moves the generator back */
    assert_true(id_generator_last_ms(&g) == T0 + 5001);
}

static void test_sequence_exhaustion(void **state)
{
    fake_clock clk = {T0};
    id_generator g;
    assert_int_equal(id_generator_init(&g, 9, fake_now, &clk), 0);
    uint64_t prev = 0, id;
    for (int i = 0; i < 4096; i++) {
        assert_int_equal(id_next(&g, &id), 0);
        assert_int_equal(id_decode(id).unix_ms, T0);
        assert_int_equal(id_decode(id).sequence, i);
        assert_true(i == 0 || id > prev);
        prev = id;
    }
    /* The 4097th id in one ms borrows the next ms. */
    assert_int_equal(id_next(&g, &id), 0);
    assert_true(id > prev);
    assert_int_equal(id_decode(id).unix_ms, T0 + 1);
    assert_int_equal(id_decode(id).sequence, 0);
    assert_int_equal(id_decode(id).node_id, 9);
}

static void test_borrowing_is_bounded(void **state)
{
    fake_clock clk = {T0};
    id_generator g;
    assert_int_equal(id_generator_init(&g, 0, fake_now, &clk), 0);
    g.max_drift_ms = 2; /* may run at most 2 ms ahead of a frozen clock: 3 ms of ids */
    uint64_t prev = 0, id;
    for (int i = 0; i < 3 * 4096; i++) {
        assert_int_equal(id_next(&g, &id), 0);
        assert_true(i == 0 || id > prev);
        prev = id;
    }
    assert_int_equal(id_decode(prev).unix_ms, T0 + 2);
    assert_int_equal(id_next(&g, &id), -1);
    assert_int_equal(id_next(&g, &id), -1);
    /* A refusal leaves the state alone: the next ms continues right after the last id. */
    clk.ms = T0 + 1;
    assert_int_equal(id_next(&g, &id), 0);
    assert_true(id > prev);
    assert_int_equal(id_decode(id).unix_ms, T0 + 3);
    assert_int_equal(id_decode(id).sequence, 0);

    /* With no drift allowed at all, a full ms is simply refused. */
    id_generator strict;
    clk.ms = T0;
    assert_int_equal(id_generator_init(&strict, 0, fake_now, &clk), 0);
    strict.max_drift_ms = 0;
    for (int i = 0; i < 4096; i++)
        assert_int_equal(id_next(&strict, &id), 0);
    assert_int_equal(id_next(&strict, &id), -1);
}

static void test_clock_outside_range(void **state)
{
    fake_clock clk = {PAYD_EPOCH_MS - 1};
    id_generator g;
    uint64_t id = 0;
    assert_int_equal(id_generator_init(&g, 0, fake_now, &clk), 0);
    assert_int_equal(id_next(&g, &id), -1);
    clk.ms = PAYD_EPOCH_MS;
    assert_int_equal(id_next(&g, &id), 0);
    assert_true(id == 0);                 /* node 0, first id at the epoch */
    clk.ms = PAYD_EPOCH_MS + (1LL << 41); /* past 2095: the 41 bits are used up */
    assert_int_equal(id_next(&g, &id), -1);
    clk.ms = PAYD_EPOCH_MS + (1LL << 41) - 1;
    assert_int_equal(id_next(&g, &id), 0);
    assert_true(id >> 63 == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_vectors),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_format_rejects_bad_prefix),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_init_node_range),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_ordering_real_clock),
        cmocka_unit_test(test_threads_distinct),
        cmocka_unit_test(test_clock_goes_back),
        cmocka_unit_test(test_sequence_exhaustion),
        cmocka_unit_test(test_lease_bound),
        cmocka_unit_test(test_mark_and_floor),
        cmocka_unit_test(test_borrowing_is_bounded),
        cmocka_unit_test(test_clock_outside_range),
        cmocka_unit_test(test_first_id_of_a_millisecond),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

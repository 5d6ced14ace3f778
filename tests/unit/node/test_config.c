/* The config table: defaults, then PAYD_* environment, then flags; units; refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "node/config.h"

static const char *fake_env[][2] = {{NULL, NULL}, {NULL, NULL}, {NULL, NULL}};

static const char *fake_getenv(const char *name)
{
    for (int i = 0; fake_env[i][0]; i++)
        if (!strcmp(fake_env[i][0], name))
            return fake_env[i][1];
    return NULL;
}

static void set_env(const char *a, const char *av, const char *b, const char *bv)
{
    fake_env[0][0] = a;
    fake_env[0][1] = av;
    fake_env[1][0] = b;
    fake_env[1][1] = bv;
}

static void test_defaults(void **state)
{
    payd_config c;
    char err[256];
    set_env(NULL, NULL, NULL, NULL);
    assert_int_equal(config_load(&c, 0, NULL, fake_getenv, err, sizeof err), 0);
    assert_string_equal(c.listen, "127.0.0.1:8080");
    assert_string_equal(c.db, "./payd.db");
    assert_int_equal(c.idempotency_ttl_ms, 24LL * 3600 * 1000);
    assert_int_equal(c.idempotency_lock_timeout_ms, 60000);
    assert_int_equal(c.processor_timeout_ms, 10000);
    assert_int_equal(c.rate_limit.count, 100);
    assert_int_equal(c.rate_limit.period_ms, 1000);
    assert_true(c.group_commit);
}

static void test_flag_over_env_over_default(void **state)
{
    payd_config c;
    char err[256];
    set_env("PAYD_DB", "/env.db", "PAYD_RATE_LIMIT", "6000/m");
    char *argv[] = {"--db", "/flag.db"};
    assert_int_equal(config_load(&c, 2, argv, fake_getenv, err, sizeof err), 0);
    assert_string_equal(c.db, "/flag.db");      /* flag beats env */
    assert_int_equal(c.rate_limit.count, 6000); /* env beats default */
    assert_int_equal(c.rate_limit.period_ms, 60000);
    assert_string_equal(c.listen, "127.0.0.1:8080"); /* default */

    char *argv2[] = {"--rate-limit=5/s", "--group-commit=false", "--idempotency-ttl", "2s"};
    assert_int_equal(config_load(&c, 4, argv2, fake_getenv, err, sizeof err), 0);
    assert_int_equal(c.rate_limit.count, 5);
    assert_false(c.group_commit);
    assert_int_equal(c.idempotency_ttl_ms, 2000);
    assert_string_equal(c.db, "/env.db");
}

static void test_refusals_name_the_flag(void **state)
{
    payd_config c;
    char err[256];
    set_env(NULL, NULL, NULL, NULL);
    char *bad_duration[] = {"--idempotency-ttl", "24"};
    assert_int_equal(config_load(&c, 2, bad_duration, fake_getenv, err, sizeof err), -1);
    assert_non_null(strstr(err, "--idempotency-ttl"));
    char *unknown[] = {"--colour", "red"};
    assert_int_equal(config_load(&c, 2, unknown, fake_getenv, err, sizeof err), -1);
    assert_non_null(strstr(err, "--colour"));
    char *range[] = {"--node-id", "1024"};
    assert_int_equal(config_load(&c, 2, range, fake_getenv, err, sizeof err), -1);
    char *missing[] = {"--db"};
    assert_int_equal(config_load(&c, 1, missing, fake_getenv, err, sizeof err), -1);
    /* the processor timeout must stay below the lock timeout */
    char *timeouts[] = {"--idempotency-lock-timeout", "1s"};
    assert_int_equal(config_load(&c, 2, timeouts, fake_getenv, err, sizeof err), -1);
    assert_non_null(strstr(err, "--processor-timeout"));
    set_env("PAYD_RATE_LIMIT", "lots", NULL, NULL);
    assert_int_equal(config_load(&c, 0, NULL, fake_getenv, err, sizeof err), -1);
    assert_non_null(strstr(err, "PAYD_RATE_LIMIT"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_flag_over_env_over_default),
        cmocka_unit_test(test_refusals_name_the_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

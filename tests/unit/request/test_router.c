/* The router (request/router.c) over a table of its own: exact matches, path parameters, HEAD
 * finding GET, 404 against 405 with the Allow list, and paths the patterns must not match
 * (trailing slashes, empty segments, a capture spanning segments). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "request/route.h"

static void noop(request *req)
{
    (void)req;
}

static const route table[] = {
    {.method = "GET", .pattern = "/healthz", .handler = noop, .name = "/healthz"},
    {.method = "GET", .pattern = "/v1/things", .handler = noop, .name = "/v1/things"},
    {.method = "POST", .pattern = "/v1/things", .handler = noop, .name = "/v1/things"},
    {.method = "GET", .pattern = "/v1/things/{id}", .handler = noop, .name = "/v1/things/{id}"},
    {.method = "DELETE", .pattern = "/v1/things/{id}", .handler = noop, .name = "/v1/things/{id}"},
    {.method = "GET", .pattern = "/v1/things/search", .handler = noop, .name = "/v1/things/search"},
    {.method = "GET",
     .pattern = "/v1/things/{id}/parts/{part}",
     .handler = noop,
     .name = "/v1/things/{id}/parts/{part}"},
    {.method = "POST", .pattern = "/v1/jobs", .handler = noop, .name = "/v1/jobs"},
    {.method = "GET",
     .pattern = "/v1/{a}/{b}/{c}/{d}/{e}",
     .handler = noop,
     .name = "/v1/{a}/{b}/{c}/{d}/{e}"},
};
static const int table_count = sizeof table / sizeof table[0];

typedef struct match {
    route_match_result result;
    const route *route;
    const char *params[MAX_PATH_PARAMS];
    char allow[96];
} match;

static match m;
static arena a;

static route_match_result run(const char *method, const char *path)
{
    memset(&m, 0, sizeof m);
    strcpy(m.allow, "untouched");
    m.result = route_match(table, table_count, method, path, &a, &m.route, m.params, m.allow,
                           sizeof m.allow);
    return m.result;
}

/* method + path finds table[index] */
static void expect_route(const char *method, const char *path, int index)
{
    assert_int_equal(run(method, path), ROUTE_MATCHED);
    assert_ptr_equal(m.route, &table[index]);
}

static int setup(void **state)
{
    (void)state;
    arena_init(&a);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    arena_free(&a);
    return 0;
}

static void test_exact_match(void **state)
{
    (void)state;
    expect_route("GET", "/healthz", 0);
    expect_route("GET", "/v1/things", 1);
    expect_route("POST", "/v1/things", 2);
    /* methods are compared exactly, as libmicrohttpd hands them over */
    assert_int_equal(run("get", "/v1/things"), ROUTE_WRONG_METHOD);
}

static void test_path_params(void **state)
{
    (void)state;
    expect_route("GET", "/v1/things/th_1", 3);
    assert_string_equal(m.params[0], "th_1");
    expect_route("DELETE", "/v1/things/th_2", 4);
    assert_string_equal(m.params[0], "th_2");
    expect_route("GET", "/v1/things/t%20x/parts/p.9", 6);
    assert_string_equal(m.params[0], "t%20x");
    assert_string_equal(m.params[1], "p.9");
    /* the first route of the table that matches wins: {id} comes before "search" */
    expect_route("GET", "/v1/things/search", 3);
    assert_string_equal(m.params[0], "search");
}

static void test_more_captures_than_params_never_match(void **state)
{
    (void)state;
    assert_int_equal(MAX_PATH_PARAMS, 4);
    assert_int_equal(run("GET", "/v1/1/2/3/4/5"), ROUTE_NO_PATH);
}

static void test_head_finds_get(void **state)
{
    (void)state;
    expect_route("HEAD", "/v1/things/th_1", 3);
    assert_string_equal(m.params[0], "th_1");
    expect_route("HEAD", "/healthz", 0);
    /* a path without a GET has no HEAD either */
    assert_int_equal(run("HEAD", "/v1/jobs"), ROUTE_WRONG_METHOD);
    assert_string_equal(m.allow, "POST");
}

static void test_404_and_405_with_allow(void **state)
{
    (void)state;
    assert_int_equal(run("GET", "/v1/nothing"), ROUTE_NO_PATH);
    assert_string_equal(m.allow, "");
    assert_null(m.route);

    assert_int_equal(run("PUT", "/v1/things"), ROUTE_WRONG_METHOD);
    assert_string_equal(m.allow, "GET, HEAD, POST");
    assert_null(m.route);
    assert_int_equal(run("PATCH", "/v1/things/th_1"), ROUTE_WRONG_METHOD);
    assert_string_equal(m.allow, "GET, HEAD, DELETE");
    assert_int_equal(run("GET", "/v1/jobs"), ROUTE_WRONG_METHOD);
    assert_string_equal(m.allow, "POST");

    /* with no room for the list the verdict is the same and nothing is written */
    const route *r = NULL;
    char allow[4] = "abc";
    assert_int_equal(route_match(table, table_count, "PUT", "/v1/things", &a, &r, NULL, allow, 0),
                     ROUTE_WRONG_METHOD);
    assert_string_equal(allow, "abc");
    /* an empty table knows no path */
    assert_int_equal(route_match(table, 0, "GET", "/healthz", &a, &r, NULL, allow, sizeof allow),
                     ROUTE_NO_PATH);
}

static void test_trailing_slash_and_empty_segments(void **state)
{
    (void)state;
    assert_int_equal(run("GET", "/v1/things/"), ROUTE_NO_PATH);
    assert_int_equal(run("GET", "/healthz/"), ROUTE_NO_PATH);
    assert_int_equal(run("GET", "/v1/things/th_1/"), ROUTE_NO_PATH);
    assert_int_equal(run("GET", "/v1/things//parts/p"), ROUTE_NO_PATH);
    assert_int_equal(run("GET", "/v1/things/th_1/parts/"), ROUTE_NO_PATH);
    assert_int_equal(run("GET", "//v1/things"), ROUTE_NO_PATH);
    assert_int_equal(run("GET", "/v1//things"), ROUTE_NO_PATH);
    assert_int_equal(run("GET", ""), ROUTE_NO_PATH);
    assert_int_equal(run("GET", "/"), ROUTE_NO_PATH);
    /* a capture is one segment: it never spans a '/' */
    assert_int_equal(run("GET", "/v1/things/a/b"), ROUTE_NO_PATH);
    /* no prefix or extension matches */
    assert_int_equal(run("GET", "/v1/thing"), ROUTE_NO_PATH);
    assert_int_equal(run("GET", "/v1/thingsx"), ROUTE_NO_PATH);
    assert_int_equal(run("GET", "/healthz?x=1"), ROUTE_NO_PATH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_match),
        cmocka_unit_test(test_path_params),
        cmocka_unit_test(test_more_captures_than_params_never_match),
        cmocka_unit_test(test_head_finds_get),
        cmocka_unit_test(test_404_and_405_with_allow),
        cmocka_unit_test(test_trailing_slash_and_empty_segments),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

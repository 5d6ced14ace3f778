/* The edge checks (http/validate.c): singleton headers, control bytes, declared query parameters,
 * framing, and the body rules, on fields with explicit lengths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "http/schema.h"
#include "http/validate.h"

#define F(name, value)                                                                             \
    {                                                                                              \
        name, sizeof name - 1, value, sizeof value - 1, false                                      \
    }

/* The caller's list: http/ names no header of its own. */
static const char *const singletons[] = {"Authorization", "Idempotency-Key", NULL};

static void test_singletons_once(void **state)
{
    (void)state;
    edge_verdict v;
    http_field ok[] = {F("Host", "x"), F("Authorization", "Bearer a"), F("X-Tag", "1"),
                       F("X-Tag", "2")};
    assert_true(edge_check_headers(ok, 4, singletons, &v));
    http_field twice[] = {F("Authorization", "Bearer a"), F("authorization", "Bearer b")};
    assert_false(edge_check_headers(twice, 2, singletons, &v));
    assert_int_equal(v.err, HTTP_REFUSAL_INVALID_HEADER);
    assert_string_equal(v.param, "authorization");
}

static void test_control_bytes_and_cut_values(void **state)
{
    (void)state;
    edge_verdict v;
    http_field nul[] = {F("Idempotency-Key", "order-1\0a")};
    assert_false(edge_check_headers(nul, 1, singletons, &v));
    assert_string_equal(v.param, "Idempotency-Key");
    http_field tab[] = {F("X-A", "a\tb")};
    assert_true(edge_check_headers(tab, 1, singletons, &v));
    http_field del[] = {F("X-A", "a\x7f")};
    assert_false(edge_check_headers(del, 1, singletons, &v));
    http_field cut[] = {{"Idempotency-Key", 15, "order-1", 7, true}};
    assert_false(edge_check_headers(cut, 1, singletons, &v));
}

static void test_query_declared_once_clean(void **state)
{
    (void)state;
    static const field names[] = {{.name = "limit", .kind = KIND_INTEGER},
                                  {.name = "cursor", .kind = KIND_STRING}};
    static const schema declared = {0, names, 2}, *accepted = &declared;
    edge_verdict v;
    http_field ok[] = {F("limit", "5"), F("cursor", "abc")};
    assert_true(edge_check_query(ok, 2, accepted, &v));
    http_field unknown[] = {F("starting_after", "x")};
    assert_false(edge_check_query(unknown, 1, accepted, &v));
    assert_int_equal(v.err, HTTP_REFUSAL_UNKNOWN_PARAMETER);
    assert_string_equal(v.param, "starting_after");
    http_field twice[] = {F("limit", "5"), F("limit", "500")};
    assert_false(edge_check_query(twice, 2, accepted, &v));
    assert_int_equal(v.err, HTTP_REFUSAL_INVALID_PARAMETER);
    http_field nul[] = {F("limit", "5\0")};
    assert_false(edge_check_query(nul, 1, accepted, &v));
    assert_int_equal(v.err, HTTP_REFUSAL_INVALID_PARAMETER);
    assert_false(edge_check_query(ok, 1, NULL, &v)); /* a route that declares none takes none */
    http_field prefix[] = {F("limi", "5")};
    assert_false(edge_check_query(prefix, 1, accepted, &v));
}

static void test_framing_conflict(void **state)
{
    (void)state;
    http_field both[] = {F("transfer-encoding", "chunked"), F("Content-Length", "5")};
    assert_true(edge_framing_conflict(both, 2));
    assert_false(edge_framing_conflict(both, 1));
}

/* Whatever the HTTP library let through, a message whose end could be read two ways. */
static void test_framing_rules(void **state)
{
    (void)state;
    edge_verdict v;
    http_field fine[] = {F("Host", "a"), F("Transfer-Encoding", "Chunked"), F("X-A_b.c~1", "1")};
    assert_true(edge_check_framing(fine, 3, &v));
    http_field space_before_colon[] = {F("Host", "a"), F("Content-Length ", "5")};
    assert_false(edge_check_framing(space_before_colon, 2, &v));
    assert_int_equal(v.err, HTTP_REFUSAL_BAD_FRAMING);
    assert_string_equal(v.param, "Content-Length ");
    http_field space_inside[] = {F("X Foo", "1")};
    assert_false(edge_check_framing(space_inside, 1, &v));
    http_field other_byte[] = {F("X@Foo", "1")};
    assert_false(edge_check_framing(other_byte, 1, &v));
    http_field host_twice[] = {F("Host", "a"), F("host", "a")};
    assert_false(edge_check_framing(host_twice, 2, &v));
    assert_string_equal(v.param, "host");
    http_field te_list[] = {F("Transfer-Encoding", "chunked, identity")};
    assert_false(edge_check_framing(te_list, 1, &v));
    http_field te_identity[] = {F("Transfer-Encoding", "identity")};
    assert_false(edge_check_framing(te_identity, 1, &v));
    http_field te_twice[] = {F("Transfer-Encoding", "chunked"), F("Transfer-Encoding", "chunked")};
    assert_false(edge_check_framing(te_twice, 2, &v));
    http_field te_and_cl[] = {F("Transfer-Encoding", "chunked"), F("Content-Length", "5")};
    assert_false(edge_check_framing(te_and_cl, 2, &v));
}

static void test_body_rules(void **state)
{
    (void)state;
    edge_verdict v;
    char detail[128];
    json_t *j;
    assert_true(edge_parse_body(NULL, NULL, 0, false, &j, &v, detail, sizeof detail));
    assert_true(json_is_object(j));
    json_decref(j);
    assert_false(edge_parse_body("application/json", "{}", 2, true, &j, &v, detail, 128));
    assert_int_equal(v.err, HTTP_REFUSAL_PAYLOAD_TOO_LARGE);
    assert_false(edge_parse_body("text/plain", "{}", 2, false, &j, &v, detail, 128));
    assert_int_equal(v.err, HTTP_REFUSAL_UNSUPPORTED_MEDIA_TYPE);
    assert_false(edge_parse_body("application/json", "[1]", 3, false, &j, &v, detail, 128));
    assert_int_equal(v.err, HTTP_REFUSAL_INVALID_JSON);
    assert_null(j);
    assert_true(edge_parse_body("application/json; charset=utf-8", "{\"a\":1}", 7, false, &j, &v,
                                detail, 128));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_singletons_once),
        cmocka_unit_test(test_control_bytes_and_cut_values),
        cmocka_unit_test(test_query_declared_once_clean),
        cmocka_unit_test(test_framing_conflict),
        cmocka_unit_test(test_framing_rules),
        cmocka_unit_test(test_body_rules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

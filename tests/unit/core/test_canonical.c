/* Canonical JSON and request fingerprints (§2): the same request written differently must get
 * the same fingerprint, and any real difference must change it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/canonical.h"

/* Canonical text of a JSON document given as text. */
static char *canon(const char *text)
{
    json_error_t err;
    json_t *v = json_loads(text, JSON_DECODE_ANY, &err);
    if (v == NULL)
        fail_msg("bad test JSON: %s", err.text);
    char *c = json_canonical(v);
    json_decref(v);
    assert_non_null(c);
    return c;
}

static void fingerprint_of(const char *method, const char *path, const char *body, char out[65])
{
    char *c = body ? canon(body) : NULL;
    request_fingerprint(method, path, c, out);
    free(c);
}

static void test_sha256_vectors(void **state)
{
    char hex[65];
    sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* the fingerprint is SHA-256 over method NUL path NUL body */
    request_fingerprint("POST", "/v1/payments", "{\"amount\":1}", hex);
    assert_string_equal(hex, "6a78131fd49b4901b8070456308afac75544840fe704c49fbe521f8c1f0e69f2");
}

static void test_sorted_at_every_depth(void **state)
{
    const char *messy = "  { \"b\" : { \"y\" : 1 , \"x\" : [ { \"d\" : 1 , \"c\" : 2 } , 3 ] } ,\n"
                        "\t\"a\" : \"z\", \"A\": null, \"_\": true, \"aa\": 1.5 }  ";
    const char *tidy =
        "{\"A\":null,\"_\":true,\"a\":\"z\",\"aa\":1.5,\"b\":{\"x\":[{\"c\":2,\"d\":1},3],"
        "\"y\":1}}";
    char *a = canon(messy), *b = canon(tidy);
    assert_string_equal(a, tidy);
    assert_string_equal(b, tidy);
    free(a);
    free(b);

    char fa[65], fb[65];
    fingerprint_of("POST", "/v1/payments", messy, fa);
    fingerprint_of("POST", "/v1/payments", tidy, fb);
    assert_string_equal(fa, fb);
}

static void test_arrays_keep_their_order(void **state)
{
    char *c = canon("[3, 1, 2, {\"b\": [2, 1], \"a\": []}]");
    assert_string_equal(c, "[3,1,2,{\"a\":[],\"b\":[2,1]}]");
    free(c);
}

static void test_differences_change_the_fingerprint(void **state)
{
    const char *body = "{\"amount\": 4200, \"currency\": \"USD\", \"metadata\": {\"k\": \"v\"}}";
    char base[65], other[65];
    fingerprint_of("POST", "/v1/payments", body, base);

    static const char *bodies[] = {
        "{\"amount\": 4201, \"currency\": \"USD\", \"metadata\": {\"k\": \"v\"}}",
        "{\"amount\": 4200, \"currency\": \"usd\", \"metadata\": {\"k\": \"v\"}}",
        "{\"amount\": 4200, \"currency\": \"USD\", \"metadata\": {\"k\": \"w\"}}",
        "{\"amount\": 4200, \"currency\": \"USD\", \"metadata\": {\"K\": \"v\"}}",
        "{\"amount\": 4200, \"currency\": \"USD\", \"metadata\": {}}",
        "{\"amount\": 4200, \"currency\": \"USD\"}",
        "{\"amount\": 4200.0, \"currency\": \"USD\", \"metadata\": {\"k\": \"v\"}}",
        "{\"amount\": \"4200\", \"currency\": \"USD\", \"metadata\": {\"k\": \"v\"}}",
        "{\"amount\": 4200, \"currency\": \"USD\", \"metadata\": {\"k\": \"v\"}, \"x\": null}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        fingerprint_of("POST", "/v1/payments", bodies[i], other);
        if (strcmp(base, other) == 0)
            fail_msg("same fingerprint for %s", bodies[i]);
    }
    fingerprint_of("PUT", "/v1/payments", body, other);
    assert_string_not_equal(base, other);
    fingerprint_of("POST", "/v1/payments/", body, other);
    assert_string_not_equal(base, other);
    fingerprint_of("POST", "/v1/refunds", body, other);
    assert_string_not_equal(base, other);
    fingerprint_of("post", "/v1/payments", body, other);
    assert_string_not_equal(base, other);
}

static void test_parts_cannot_run_together(void **state)
{
    char a[65], b[65];
    request_fingerprint("POST", "/v1/a", "b", a);
    request_fingerprint("POST", "/v1/ab", "", b);
    assert_string_not_equal(a, b);
    request_fingerprint("POS", "T/v1/a", "", a);
    request_fingerprint("POST", "/v1/a", "", b);
    assert_string_not_equal(a, b);
    /* no body and an empty body are the same request */
    request_fingerprint("GET", "/v1/a", NULL, a);
    request_fingerprint("GET", "/v1/a", "", b);
    assert_string_equal(a, b);
}

static void test_unicode_survives(void **state)
{
    /* Raw UTF-8 and \u escapes are the same string, so they must canonicalise alike. */
    const char *raw = "{\"name\": \"h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80\"}";
    const char *escaped = "{\"name\": \"h\\u00e9llo \\u4e16\\u754c \\ud83d\\ude00\"}";
    char *a = canon(raw), *b = canon(escaped);
    assert_string_equal(a, "{\"name\":\"h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x98\x80\"}");
    assert_string_equal(a, b);
    free(a);
    free(b);
    /* keys too, sorted by their UTF-8 bytes */
    a = canon("{\"\xc3\xa9\": 1, \"z\": 2, \"e\": 3}");
    assert_string_equal(a, "{\"e\":3,\"z\":2,\"\xc3\xa9\":1}");
    free(a);
    /* control characters and quotes are escaped, '/' is not */
    a = canon("{\"s\": \"a\\\"b\\\\c\\n\\u0001/\"}");
    assert_string_equal(a, "{\"s\":\"a\\\"b\\\\c\\n\\u0001/\"}");
    free(a);
}

static void test_scalars_and_null(void **state)
{
    assert_null(json_canonical(NULL));
    char *c = canon("42");
    assert_string_equal(c, "42");
    free(c);
    c = canon("\"x\"");
    assert_string_equal(c, "\"x\"");
    free(c);
    c = canon("{}");
    assert_string_equal(c, "{}");
    free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_sorted_at_every_depth),
        cmocka_unit_test(test_arrays_keep_their_order),
        cmocka_unit_test(test_differences_change_the_fingerprint),
        cmocka_unit_test(test_parts_cannot_run_together),
        cmocka_unit_test(test_unicode_survives),
        cmocka_unit_test(test_scalars_and_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

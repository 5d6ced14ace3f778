/* The JSON writer: what it writes parses back to the same values, with commas and escapes. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/jsonw.h"

static void test_nested_values_parse_back(void **state)
{
    jsonw w;
    jw_init(&w);
    jw_object_begin(&w);
    jw_key(&w, "object");
    jw_string(&w, "list");
    jw_key(&w, "data");
    jw_array_begin(&w);
    for (int i = 0; i < 3; i++) {
        jw_object_begin(&w);
        jw_key(&w, "n");
        jw_int(&w, i - 1);
        jw_key(&w, "meta");
        jw_raw(&w, i == 1 ? "{\"a\":\"1\"}" : NULL, "{}");
        jw_key(&w, "none");
        jw_string(&w, NULL);
        jw_object_end(&w);
    }
    jw_array_end(&w);
    jw_key(&w, "has_more");
    jw_bool(&w, false);
    jw_key(&w, "big");
    jw_int(&w, INT64_MAX);
    jw_key(&w, "small");
    jw_int(&w, INT64_MIN);
    jw_key(&w, "zero");
    jw_int(&w, 0);
    jw_object_end(&w);
    size_t len;
    char *text = jw_take(&w, &len);
    assert_int_equal(len, strlen(text));
    json_error_t err;
    json_t *v = json_loads(text, 0, &err);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "object")), "list");
    json_t *data = json_object_get(v, "data");
    assert_int_equal(json_array_size(data), 3);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(data, 0), "n")), -1);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(json_array_get(data, 1), "meta"), "a")),
        "1");
    assert_true(json_is_null(json_object_get(json_array_get(data, 2), "none")));
    assert_true(json_is_false(json_object_get(v, "has_more")));
    assert_int_equal(json_integer_value(json_object_get(v, "big")), INT64_MAX);
    assert_int_equal(json_integer_value(json_object_get(v, "small")), INT64_MIN);
    assert_non_null(strstr(text, "\"zero\":0"));
    json_decref(v);
    free(text);
}

static void test_strings_are_escaped(void **state)
{
    const char *nasty = "quote\" back\\slash\nnew\ttab\x01\x1f ünïcødé €";
    jsonw w;
    jw_init(&w);
    jw_array_begin(&w);
    jw_string(&w, nasty);
    jw_string(&w, "");
    jw_array_end(&w);
    char *text = jw_take(&w, NULL);
    json_t *v = json_loads(text, 0, NULL);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_array_get(v, 0)), nasty);
    assert_string_equal(json_string_value(json_array_get(v, 1)), "");
    json_decref(v);
    free(text);
}

static void test_empty_containers_and_reuse(void **state)
{
    jsonw w;
    jw_init(&w);
    jw_object_begin(&w);
    jw_key(&w, "a");
    jw_array_begin(&w);
    jw_array_end(&w);
    jw_key(&w, "o");
    jw_object_begin(&w);
    jw_object_end(&w);
    jw_object_end(&w);
    char *text = jw_take(&w, NULL);
    assert_string_equal(text, "{\"a\":[],\"o\":{}}");
    free(text);
    jw_int(&w, 7); /* the writer is fresh again after jw_take */
    text = jw_take(&w, NULL);
    assert_string_equal(text, "7");
    free(text);
}

/* A member after an object's own ones (a new key's secret after its row), and after none. */
static void test_reopened_object_takes_more_members(void **state)
{
    jsonw w;
    jw_init(&w);
    jw_object_begin(&w);
    jw_key(&w, "id");
    jw_int(&w, 1);
    jw_object_end(&w);
    jw_object_reopen(&w);
    jw_key(&w, "secret");
    jw_string(&w, "s");
    jw_object_end(&w);
    char *text = jw_take(&w, NULL);
    assert_string_equal(text, "{\"id\":1,\"secret\":\"s\"}");
    free(text);
    jw_object_begin(&w);
    jw_object_end(&w);
    jw_object_reopen(&w);
    jw_key(&w, "a");
    jw_null(&w);
    jw_object_end(&w);
    text = jw_take(&w, NULL);
    assert_string_equal(text, "{\"a\":null}");
    free(text);
}

/* Bytes that are not UTF-8 (a client's raw method, say) become U+FFFD; valid UTF-8 passes. */
static void test_invalid_utf8_is_replaced(void **state)
{
    (void)state;
    jsonw w;
    jw_init(&w);
    jw_string(&w, "\xff\xfe"
                  "a\xc3\xa9"
                  "\xe0\x80\x80"
                  "\xed\xa0\x80"
                  "\xf0\x9f\x98\x80\xc3");
    char *text = jw_take(&w, NULL);
    assert_string_equal(text, "\"\\ufffd\\ufffda\xc3\xa9\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd"
                              "\\ufffd\xf0\x9f\x98\x80\\ufffd\"");
    json_t *back = json_loads(text, JSON_DECODE_ANY, NULL);
    assert_non_null(back);
    json_decref(back);
    free(text);
}

/* The members of a resource row: ids and times are written without the escaping pass, so the
 * exact text is checked, commas and nulls included. */
static void test_members_write_ids_times_and_nulls(void **state)
{
    jsonw w;
    jw_init(&w);
    jw_array_begin(&w);
    for (int i = 0; i < 2; i++) {
        jw_object_begin(&w);
        jw_member_id(&w, "id", "pay", 1);
        jw_member_id(&w, "order_id", "ord", 0);
        jw_member_time(&w, "created_at", 1700000000123456);
        jw_member_int(&w, "amount", -5);
        jw_member_string(&w, "description", NULL);
        jw_member_string(&w, "currency", "USD");
        jw_object_end(&w);
    }
    jw_array_end(&w);
    char *text = jw_take(&w, NULL);
    const char *one = "{\"id\":\"pay_0000000000001\",\"order_id\":null,"
                      "\"created_at\":\"2023-11-14T22:13:20.123Z\",\"amount\":-5,"
                      "\"description\":null,\"currency\":\"USD\"}";
    char want[512];
    snprintf(want, sizeof want, "[%s,%s]", one, one);
    assert_string_equal(text, want);
    free(text);
    (void)state;
}

/* What the writer's escaping must give for ASCII text and stray bytes, a byte at a time. */
static size_t reference_escape(const char *s, char *out)
{
    char *o = out;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            o += sprintf(o, "\\%c", *p);
        else if (*p == '\n')
            o += sprintf(o, "\\n");
        else if (*p == '\r')
            o += sprintf(o, "\\r");
        else if (*p == '\t')
            o += sprintf(o, "\\t");
        else if (*p < 0x20)
            o += sprintf(o, "\\u%04x", *p);
        else if (*p >= 0x80)
            o += sprintf(o, "\\ufffd"); /* only lone bytes here */
        else
            *o++ = (char)*p;
    }
    *o++ = '"';
    *o = '\0';
    return (size_t)(o - out);
}

/* Strings are checked 8 bytes at a time: a byte that needs escaping is found at every position
 * of every length around those words, in a value and in a member. */
static void test_escapes_found_at_every_position(void **state)
{
    static const char specials[] = {'"',  '\\', '\n', '\r', '\t',       0x01,
                                    0x1f, 0x7f, ' ',  '~',  (char)0x80, (char)0xff};
    for (size_t n = 0; n <= 26; n++) {
        for (size_t at = 0; at < (n ? n : 1); at++) {
            for (size_t k = 0; k < sizeof specials; k++) {
                char s[32], want[256], got_member[300];
                memset(s, 'a', n);
                s[n] = '\0';
                if (n)
                    s[at] = specials[k];
                reference_escape(s, want);
                jsonw w;
                jw_init(&w);
                jw_string(&w, s);
                char *text = jw_take(&w, NULL);
                assert_string_equal(text, want);
                free(text);
                jw_object_begin(&w);
                jw_member_string(&w, "k", s);
                jw_object_end(&w);
                text = jw_take(&w, NULL);
                snprintf(got_member, sizeof got_member, "{\"k\":%s}", want);
                assert_string_equal(text, got_member);
                free(text);
            }
        }
    }
    (void)state;
}

/* Every count of digits, both signs and both ends of int64, as a value and as a member. */
static void test_integers_of_every_length(void **state)
{
    int64_t values[128];
    size_t count = 0;
    values[count++] = 0;
    values[count++] = INT64_MAX;
    values[count++] = INT64_MIN;
    for (int64_t p = 1;; p *= 10) { /* 10^0 to 10^18 */
        int64_t near[] = {p - 1, p, p + 1};
        for (int i = 0; i < 3; i++) {
            values[count++] = near[i];
            values[count++] = -near[i];
        }
        if (p > INT64_MAX / 10)
            break;
    }
    for (size_t i = 0; i < count; i++) {
        char want[64];
        snprintf(want, sizeof want, "[%lld,{\"n\":%lld}]", (long long)values[i],
                 (long long)values[i]);
        jsonw w;
        jw_init(&w);
        jw_array_begin(&w);
        jw_int(&w, values[i]);
        jw_object_begin(&w);
        jw_member_int(&w, "n", values[i]);
        jw_object_end(&w);
        jw_array_end(&w);
        char *text = jw_take(&w, NULL);
        assert_string_equal(text, want);
        free(text);
    }
    (void)state;
}

/* A row's "object" member, then its mode when the writer has one (docs/modes.md). */
static void test_object_member_says_the_mode(void **state)
{
    static const struct {
        int mode; /* -1: a writer without one */
        const char *want;
    } cases[] = {
        {-1, "{\"object\":\"payment\",\"id\":1}"},
        {0, "{\"object\":\"payment\",\"livemode\":false,\"id\":1}"},
        {1, "{\"object\":\"payment\",\"livemode\":true,\"id\":1}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        jsonw w;
        if (cases[i].mode < 0)
            jw_init(&w);
        else
            jw_init_mode(&w, cases[i].mode);
        jw_object_begin(&w);
        jw_member_object(&w, "payment");
        jw_member_int(&w, "id", 1);
        jw_object_end(&w);
        char *text = jw_take(&w, NULL);
        assert_string_equal(text, cases[i].want);
        free(text);
    }
    (void)state;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested_values_parse_back),
        cmocka_unit_test(test_strings_are_escaped),
        cmocka_unit_test(test_empty_containers_and_reuse),
        cmocka_unit_test(test_invalid_utf8_is_replaced),
        cmocka_unit_test(test_members_write_ids_times_and_nulls),
        cmocka_unit_test(test_reopened_object_takes_more_members),
        cmocka_unit_test(test_escapes_found_at_every_position),
        cmocka_unit_test(test_integers_of_every_length),
        cmocka_unit_test(test_object_member_says_the_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

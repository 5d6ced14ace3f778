/* Declared inputs (http/schema.c): each kind's accepted and refused values, absence and null,
 * unknown members, query text, and that every schema of the route table fits its struct. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api/common.h"
#include "api/routes.h"
#include "request/route.h"
#include "http/schema.h"

typedef struct sample {
    const char *name, *kind, *meta, *email, *token, *url;
    input_id account;
    char currency[4];
    int64_t count;
    int flag;
    input_time at;
} sample;

static bool url_check(const field *f, json_t *value, void *out, arena *a, const char **detail)
{
    (void)f;
    const char *s = json_string_value(value);
    if (strncmp(s, "https://", 8) != 0) {
        *detail = "'url' must use https";
        return false;
    }
    *(const char **)out = arena_strdup(a, s);
    return true;
}

static const char *const kinds[] = {"a", "b", NULL};
static const field sample_fields[] = {
    {.name = "name", .kind = KIND_STRING, .required = true, IN(sample, name), .min = 1, .max = 5},
    {.name = "account_id", .kind = KIND_ID, IN(sample, account), .prefix = "acct"},
    /* the domain's rule (api/common.c over core/currency.c), handed in as a check */
    {.name = "currency",
     .kind = KIND_CUSTOM,
     IN(sample, currency),
     .type = "string",
     .min = 3,
     .max = 3,
     .pattern = "^[A-Za-z]{3}$",
     .check = currency_check},
    {.name = "kind", .kind = KIND_ENUM, IN(sample, kind), .values = kinds},
    {.name = "count", .kind = KIND_INTEGER, IN(sample, count), .min = 1, .max = 10, .absent = -1},
    {.name = "flag", .kind = KIND_BOOLEAN, IN(sample, flag), .absent = -1},
    {.name = "metadata", .kind = KIND_METADATA, IN(sample, meta), .max = 2},
    {.name = "email", .kind = KIND_EMAIL, IN(sample, email), .min = 3, .max = 20},
    {.name = "source",
     .kind = KIND_TOKEN,
     IN(sample, token),
     .prefix = "tok_",
     .chars = "A-Za-z0-9_",
     .min = 1,
     .max = 4},
    {.name = "url",
     .kind = KIND_CUSTOM,
     IN(sample, url),
     .type = "string",
     .min = 1,
     .max = 30,
     .check = url_check},
    {.name = "at", .kind = KIND_TIME, IN(sample, at)},
};
static const schema sample_schema = SCHEMA(sample, sample_fields);

static arena a;
static input_error e;
static sample out;

/* Decodes a body given as JSON text; true when accepted. */
static bool decode(const char *text)
{
    json_t *body = json_loads(text, JSON_ALLOW_NUL, NULL);
    assert_non_null(body);
    memset(&out, 0, sizeof out);
    memset(&e, 0, sizeof e);
    bool ok = schema_decode_body(&sample_schema, body, &out, &a, &e);
    json_decref(body);
    return ok;
}

/* Refused with code err naming param. */
static void refused(const char *text, int err, const char *param)
{
    if (decode(text))
        fail_msg("accepted: %s", text);
    assert_int_equal(e.err, err);
    assert_string_equal(e.param, param);
    assert_true(e.detail[0] != '\0');
}

static void invalid(const char *text, const char *param)
{
    refused(text, HTTP_REFUSAL_INVALID_PARAMETER, param);
}

static void test_absent_null_and_unknown(void **state)
{
    (void)state;
    assert_true(decode("{\"name\": \"abc\"}"));
    assert_string_equal(out.name, "abc");
    assert_int_equal(out.count, -1); /* absent: the declared value */
    assert_int_equal(out.flag, -1);
    assert_null(out.account.text);
    assert_string_equal(out.currency, "");
    assert_true(decode("{\"name\": \"abc\", \"count\": null, \"kind\": null}")); /* null: absent */
    assert_int_equal(out.count, -1);
    assert_null(out.kind);
    refused("{}", HTTP_REFUSAL_MISSING_PARAMETER, "name");
    refused("{\"name\": null}", HTTP_REFUSAL_MISSING_PARAMETER, "name");
    refused("{\"name\": \"a\", \"colour\": 1}", HTTP_REFUSAL_UNKNOWN_PARAMETER, "colour");
}

static void test_strings(void **state)
{
    (void)state;
    invalid("{\"name\": \"\"}", "name");
    invalid("{\"name\": \"abcdef\"}", "name");
    invalid("{\"name\": 5}", "name");
    invalid("{\"name\": \"a\\u0000b\"}", "name");
    assert_true(decode("{\"name\": \"abcde\"}"));
}

static void test_integers(void **state)
{
    (void)state;
    assert_true(decode("{\"name\": \"a\", \"count\": 10}"));
    assert_int_equal(out.count, 10);
    invalid("{\"name\": \"a\", \"count\": 10.0}", "count");
    invalid("{\"name\": \"a\", \"count\": \"5\"}", "count");
    invalid("{\"name\": \"a\", \"count\": true}", "count");
    invalid("{\"name\": \"a\", \"count\": 0}", "count");
    invalid("{\"name\": \"a\", \"count\": 11}", "count");
    invalid("{\"name\": \"a\", \"count\": 1e1}", "count");
}

static void test_ids(void **state)
{
    (void)state;
    assert_true(decode("{\"name\": \"a\", \"account_id\": \"acct_03b4473zr0000\"}"));
    assert_string_equal(out.account.text, "acct_03b4473zr0000");
    assert_true(out.account.id != 0);
    /* another prefix, or garbage after the right one, names no account: the handler's 404 */
    assert_true(decode("{\"name\": \"a\", \"account_id\": \"ord_03b4473zr0000\"}"));
    assert_int_equal(out.account.id, 0);
    assert_true(decode("{\"name\": \"a\", \"account_id\": \"acct_nope\"}"));
    assert_int_equal(out.account.id, 0);
    invalid("{\"name\": \"a\", \"account_id\": \"\"}", "account_id");
    invalid("{\"name\": \"a\", \"account_id\": 42}", "account_id");
}

static void test_currency_and_enum(void **state)
{
    (void)state;
    assert_true(decode("{\"name\": \"a\", \"currency\": \"usd\", \"kind\": \"b\"}"));
    assert_string_equal(out.currency, "USD"); /* any case in, upper case out */
    assert_string_equal(out.kind, "b");
    invalid("{\"name\": \"a\", \"currency\": \"US1\"}", "currency");
    invalid("{\"name\": \"a\", \"currency\": \"USDX\"}", "currency");
    invalid("{\"name\": \"a\", \"currency\": 840}", "currency");
    invalid("{\"name\": \"a\", \"currency\": \"QQQ\"}", "currency"); /* 3 letters, no code */
    invalid("{\"name\": \"a\", \"kind\": \"c\"}", "kind");
    invalid("{\"name\": \"a\", \"kind\": \"A\"}", "kind");
    invalid("{\"name\": \"a\", \"kind\": 1}", "kind");
}

static void test_boolean_metadata_email_token(void **state)
{
    (void)state;
    assert_true(decode("{\"name\": \"a\", \"flag\": false}"));
    assert_int_equal(out.flag, 0);
    invalid("{\"name\": \"a\", \"flag\": \"yes\"}", "flag");
    invalid("{\"name\": \"a\", \"flag\": 1}", "flag");

    assert_true(decode("{\"name\": \"a\", \"metadata\": {\"z\": \"1\", \"a\": \"2\"}}"));
    assert_string_equal(out.meta, "{\"a\":\"2\",\"z\":\"1\"}"); /* canonical */
    invalid("{\"name\": \"a\", \"metadata\": {\"a\": \"1\", \"b\": \"2\", \"c\": \"3\"}}",
            "metadata");
    invalid("{\"name\": \"a\", \"metadata\": {\"a\": 1}}", "metadata");
    invalid("{\"name\": \"a\", \"metadata\": {\"" /* a 41-byte name */
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": \"x\"}}",
            "metadata");
    invalid("{\"name\": \"a\", \"metadata\": [\"a\"]}", "metadata");

    assert_true(decode("{\"name\": \"a\", \"email\": \"a@b.c\"}"));
    invalid("{\"name\": \"a\", \"email\": \"not-an-address\"}", "email");
    invalid("{\"name\": \"a\", \"email\": \"a b@c.d\"}", "email");
    invalid("{\"name\": \"a\", \"email\": \"a@b@c\"}", "email");

    assert_true(decode("{\"name\": \"a\", \"source\": \"tok_ab_1\"}"));
    invalid("{\"name\": \"a\", \"source\": \"tok_abcde\"}", "source");
    invalid("{\"name\": \"a\", \"source\": \"tok_\"}", "source");
    invalid("{\"name\": \"a\", \"source\": \"visa\"}", "source");
    invalid("{\"name\": \"a\", \"source\": \"tok_a-b\"}", "source");
}

static void test_custom_and_time(void **state)
{
    (void)state;
    assert_true(decode("{\"name\": \"a\", \"url\": \"https://x\"}"));
    assert_string_equal(out.url, "https://x");
    refused("{\"name\": \"a\", \"url\": \"http://x\"}", HTTP_REFUSAL_INVALID_PARAMETER, "url");
    assert_string_equal(e.detail, "'url' must use https");
    invalid("{\"name\": \"a\", \"url\": [\"https://x\"]}", "url");
    assert_true(decode("{\"name\": \"a\", \"at\": \"2026-11-30T08:00:00Z\"}"));
    assert_string_equal(out.at.text, "2026-11-30T08:00:00Z");
    invalid("{\"name\": \"a\", \"at\": \"yesterday\"}", "at");
}

/* ---- query ---- */

typedef struct page {
    int64_t limit;
    const char *status;
    input_time since;
} page;

static const field page_fields[] = {
    {.name = "limit",
     .kind = KIND_INTEGER,
     IN(page, limit),
     .min = 1,
     .max = 100,
     .dflt = "20",
     .err = ERR_INVALID_LIMIT},
    {.name = "status", .kind = KIND_ENUM, IN(page, status), .values = kinds},
    {.name = "since", .kind = KIND_TIME, IN(page, since)},
};
static const schema page_schema = SCHEMA(page, page_fields);

static const char *const *query_pairs;
static const char *lookup(void *ctx, const char *name)
{
    (void)ctx;
    for (const char *const *p = query_pairs; *p; p += 2)
        if (!strcmp(*p, name))
            return p[1];
    return NULL;
}

static bool decode_query(const char *const *pairs, page *p)
{
    query_pairs = pairs;
    memset(p, 0, sizeof *p);
    return schema_decode_query(&page_schema, lookup, NULL, p, &a, &e);
}

static void test_query(void **state)
{
    (void)state;
    page p;
    const char *const none[] = {NULL};
    assert_true(decode_query(none, &p));
    assert_int_equal(p.limit, 20); /* the documented default */
    assert_null(p.status);
    assert_null(p.since.text);
    const char *const given[] = {"limit", "5", "status", "a", "since", "2026-01-02T03:04:05Z",
                                 NULL};
    assert_true(decode_query(given, &p));
    assert_int_equal(p.limit, 5);
    assert_string_equal(p.status, "a");
    assert_true(p.since.us > 0);
    const char *const bad_limits[] = {"0", "101", "-1", "abc", "2.5", "", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad_limits / sizeof *bad_limits; i++) {
        const char *const q[] = {"limit", bad_limits[i], NULL};
        assert_false(decode_query(q, &p));
        assert_int_equal(e.err, ERR_INVALID_LIMIT);
        assert_string_equal(e.param, "limit");
    }
    const char *const bad_status[] = {"status", "c", NULL};
    assert_false(decode_query(bad_status, &p));
    assert_int_equal(e.err, HTTP_REFUSAL_INVALID_PARAMETER);
    const char *const bad_time[] = {"since", "yesterday", NULL};
    assert_false(decode_query(bad_time, &p));
    assert_string_equal(e.param, "since");
    const char *const not_utf8[] = {"status", "\xff", NULL};
    assert_false(decode_query(not_utf8, &p));
    assert_string_equal(e.param, "status");
}

static void test_layouts(void **state)
{
    (void)state;
    assert_null(schema_layout_error(&sample_schema));
    assert_null(schema_layout_error(&page_schema));
    static const field wrong[] = {{.name = "flag", .kind = KIND_INTEGER, IN(sample, flag)}};
    static const schema wrong_schema = SCHEMA(sample, wrong);
    assert_string_equal(schema_layout_error(&wrong_schema), "flag");
    for (int i = 0; i < payd_route_count; i++) {
        const route *r = &payd_routes[i];
        const char *bad = r->body ? schema_layout_error(r->body) : NULL;
        if (!bad && r->query)
            bad = schema_layout_error(r->query);
        if (bad)
            fail_msg("%s %s: field %s does not fit its struct", r->method, r->pattern, bad);
        if (r->body && !(r->flags & ROUTE_JSON_BODY))
            fail_msg("%s %s declares a body it does not read", r->method, r->pattern);
        /* the pipeline runs only steps after a claim or a write job (route.h) */
        if ((r->flags & (ROUTE_IDEM_REQUIRED | ROUTE_IDEM_OPTIONAL | ROUTE_WRITES)) && !r->start)
            fail_msg("%s %s takes a key or writes but is not written as steps", r->method,
                     r->pattern);
    }
}

static void test_documented(void **state)
{
    (void)state;
    json_t *doc = schema_body_json(&sample_schema);
    /* optional: its schema, or null (taken as not given) */
    json_t *source = json_object_get(json_object_get(doc, "properties"), "source");
    json_t *either = json_object_get(source, "anyOf");
    assert_string_equal(json_string_value(json_object_get(json_array_get(either, 0), "pattern")),
                        "^tok_[A-Za-z0-9_]{1,4}$");
    assert_string_equal(json_string_value(json_object_get(json_array_get(either, 1), "type")),
                        "null");
    /* a custom field's documented pattern */
    json_t *currency = json_object_get(json_object_get(doc, "properties"), "currency");
    json_t *value = json_array_get(json_object_get(currency, "anyOf"), 0);
    assert_string_equal(json_string_value(json_object_get(value, "pattern")), "^[A-Za-z]{3}$");
    assert_int_equal(json_integer_value(json_object_get(value, "maxLength")), 3);
    assert_int_equal(json_array_size(json_object_get(doc, "required")), 1);
    json_decref(doc);
    json_t *q = schema_query_json(&page_schema);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(q, "limit"), "default")),
                     20);
    json_decref(q);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_absent_null_and_unknown),
        cmocka_unit_test(test_strings),
        cmocka_unit_test(test_integers),
        cmocka_unit_test(test_ids),
        cmocka_unit_test(test_currency_and_enum),
        cmocka_unit_test(test_boolean_metadata_email_token),
        cmocka_unit_test(test_custom_and_time),
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_layouts),
        cmocka_unit_test(test_documented),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}

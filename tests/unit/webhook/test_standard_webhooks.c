/* The server's Standard Webhooks signer (src/webhook/signature.c) against the specification's
 * test vectors (clients/conformance/standard-webhooks-vectors.json): it gives every `sign`
 * entry's signature, and for every `verify` case marked valid, one of the signatures in the
 * case's webhook-signature header. Then a secret of the first release (48 hex digits) and a
 * rotation's two signatures, against vectors computed independently (Python's hmac and base64). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "webhook/signature.h"

static json_t *vectors;

static int load_vectors(void **state)
{
    (void)state;
    json_error_t error;
    vectors = json_load_file(PAYD_SOURCE_DIR "/clients/conformance/standard-webhooks-vectors.json",
                             0, &error);
    if (!vectors)
        print_error("vectors: %s (line %d)\n", error.text, error.line);
    return vectors ? 0 : -1;
}

static int free_vectors(void **state)
{
    (void)state;
    json_decref(vectors);
    return 0;
}

static const char *text_of(json_t *object, const char *member)
{
    const char *text = json_string_value(json_object_get(object, member));
    assert_non_null(text);
    return text;
}

/* What the server signs a case with. */
static void sign_case(const char *secret, const char *msg_id, const char *timestamp,
                      const char *payload, char out[WEBHOOK_STANDARD_SIGNATURE_MAX])
{
    char *end;
    long long unix_s = strtoll(timestamp, &end, 10);
    assert_true(*timestamp && !*end);
    assert_int_equal(webhook_sign_standard(secret, msg_id, unix_s, payload, strlen(payload), out,
                                           WEBHOOK_STANDARD_SIGNATURE_MAX),
                     0);
}

static void test_every_sign_vector(void **state)
{
    (void)state;
    json_t *signs = json_object_get(vectors, "sign"), *v;
    size_t i;
    assert_true(json_array_size(signs) > 0);
    json_array_foreach(signs, i, v)
    {
        char out[WEBHOOK_STANDARD_SIGNATURE_MAX], timestamp[24];
        snprintf(timestamp, sizeof timestamp, "%lld",
                 (long long)json_integer_value(json_object_get(v, "timestamp")));
        sign_case(text_of(v, "secret"), text_of(v, "msg_id"), timestamp, text_of(v, "payload"),
                  out);
        assert_string_equal(out, text_of(v, "signature"));
    }
}

/* True when signature is one of the header's space-separated signatures. */
static bool header_holds(const char *header, const char *signature)
{
    size_t len = strlen(signature);
    for (const char *p = header; (p = strstr(p, signature)) != NULL; p += len)
        if ((p == header || p[-1] == ' ') && (p[len] == '\0' || p[len] == ' '))
            return true;
    return false;
}

static void test_every_valid_verify_case(void **state)
{
    (void)state;
    json_t *cases = json_object_get(vectors, "verify"), *v;
    size_t i, valid = 0;
    json_array_foreach(cases, i, v)
    {
        if (!json_is_true(json_object_get(v, "valid")))
            continue;
        json_t *headers = json_object_get(v, "headers");
        char out[WEBHOOK_STANDARD_SIGNATURE_MAX];
        sign_case(text_of(v, "secret"), text_of(headers, "webhook-id"),
                  text_of(headers, "webhook-timestamp"), text_of(v, "payload"), out);
        if (!header_holds(text_of(headers, "webhook-signature"), out))
            fail_msg("case \"%s\": the server signs %s", text_of(v, "name"), out);
        valid++;
    }
    assert_true(valid >= 5); /* the file's valid cases, padding and prefix ones included */
}

#define BODY       "{\"id\":\"evt_1\"}"
#define NEW_SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define HEX_SECRET "whsec_0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_a_hex_secret_is_base64_text(void **state)
{
    (void)state;
    uint8_t key[WEBHOOK_KEY_MAX];
    assert_int_equal(webhook_secret_key(HEX_SECRET, key), 36);
    char out[WEBHOOK_STANDARD_SIGNATURE_MAX];
    assert_int_equal(webhook_sign_standard(HEX_SECRET, "evt_0000000000001", 1796000000, BODY,
                                           strlen(BODY), out, sizeof out),
                     0);
    assert_string_equal(out, "v1,JcBhEpCMcylN2jHuS4Sj14gkanFwRp02JSELOQDZtU8=");
    assert_int_equal(webhook_secret_key("whsec_not*base64", key), -1);
    assert_int_equal(webhook_secret_key("whsec_", key), -1);
}

static void test_a_rotation_signs_with_both_new_first(void **state)
{
    (void)state;
    char payd[WEBHOOK_PAYD_SIGNATURE_MAX], standard[WEBHOOK_STANDARD_SIGNATURE_MAX];
    assert_int_equal(webhook_signature_headers(NEW_SECRET, HEX_SECRET, "evt_0000000000001",
                                               1796000000, BODY, strlen(BODY), payd, standard),
                     0);
    assert_string_equal(standard, "v1,pePbwPlcgoe1J4H8aSZyxZAdfIVBcxaqpdO5a9z5ej4= "
                                  "v1,JcBhEpCMcylN2jHuS4Sj14gkanFwRp02JSELOQDZtU8=");
    assert_string_equal(payd,
                        "t=1796000000,"
                        "v1=c3e1c5a5adad2a18c2823ea432a44417b3d040fb15701d69384e86107fc0c8b1,"
                        "v1=206c51a2d88344a786824303fe30ab6af3c1c93498ca99c39802365d3e478081");
    assert_int_equal(webhook_signature_headers(NEW_SECRET, NULL, "evt_0000000000001", 1796000000,
                                               BODY, strlen(BODY), payd, standard),
                     0);
    assert_string_equal(standard, "v1,pePbwPlcgoe1J4H8aSZyxZAdfIVBcxaqpdO5a9z5ej4=");
    assert_string_equal(
        payd, "t=1796000000,v1=c3e1c5a5adad2a18c2823ea432a44417b3d040fb15701d69384e86107fc0c8b1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_sign_vector),
        cmocka_unit_test(test_every_valid_verify_case),
        cmocka_unit_test(test_a_hex_secret_is_base64_text),
        cmocka_unit_test(test_a_rotation_signs_with_both_new_first),
    };
    return cmocka_run_group_tests(tests, load_vectors, free_vectors);
}

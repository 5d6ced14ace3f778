/* payd_webhook_verify_standard and payd_webhook_sign_standard (src/client/webhook.c) replay
 * every case of clients/conformance/standard-webhooks-vectors.json: the specification's signing
 * vector, and each verification case accepted exactly when it is marked valid. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "payd/client.h"

static json_t *vectors;

static int load_vectors(void **state)
{
    (void)state;
    json_error_t error;
    vectors = json_load_file(PAYD_SOURCE_DIR "/clients/conformance/standard-webhooks-vectors.json",
                             0, &error);
    if (!vectors)
        fprintf(stderr, "vectors: %s\n", error.text);
    return vectors ? 0 : -1;
}

static int free_vectors(void **state)
{
    (void)state;
    json_decref(vectors);
    return 0;
}

static const char *text(json_t *o, const char *name)
{
    return json_string_value(json_object_get(o, name));
}

static void test_sign_gives_the_specifications_signature(void **state)
{
    (void)state;
    json_t *cases = json_object_get(vectors, "sign");
    assert_true(json_array_size(cases) >= 1);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        const char *payload = text(c, "payload");
        char out[PAYD_WEBHOOK_STANDARD_SIGNATURE_MAX];
        assert_int_equal(
            payd_webhook_sign_standard(text(c, "secret"), text(c, "msg_id"),
                                       json_integer_value(json_object_get(c, "timestamp")), payload,
                                       strlen(payload), out, sizeof out),
            0);
        assert_string_equal(out, text(c, "signature"));
        /* and what it signs verifies */
        char timestamp[24];
        snprintf(timestamp, sizeof timestamp, "%lld",
                 (long long)json_integer_value(json_object_get(c, "timestamp")));
        assert_int_equal(
            payd_webhook_verify_standard(text(c, "secret"), text(c, "msg_id"), timestamp, out,
                                         payload, strlen(payload),
                                         json_integer_value(json_object_get(c, "timestamp")), 0),
            PAYD_WEBHOOK_OK);
    }
}

static void test_every_verification_case(void **state)
{
    (void)state;
    int64_t tolerance = json_integer_value(json_object_get(vectors, "tolerance_seconds"));
    json_t *cases = json_object_get(vectors, "verify");
    assert_true(json_array_size(cases) >= 10);
    int failures = 0;
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        json_t *headers = json_object_get(c, "headers");
        const char *payload = text(c, "payload");
        payd_webhook_check got = payd_webhook_verify_standard(
            text(c, "secret"), text(headers, "webhook-id"), text(headers, "webhook-timestamp"),
            text(headers, "webhook-signature"), payload, strlen(payload),
            json_integer_value(json_object_get(c, "now")), tolerance);
        bool valid = json_is_true(json_object_get(c, "valid"));
        if ((got == PAYD_WEBHOOK_OK) != valid) {
            fprintf(stderr, "case \"%s\": %s, expected %s\n", text(c, "name"),
                    payd_webhook_check_name(got), valid ? "ok" : "a refusal");
            failures++;
        }
    }
    assert_int_equal(failures, 0);
}

static void test_refusals_say_why(void **state)
{
    (void)state;
    const char *secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", *id = "msg_1", *body = "{}";
    char signature[PAYD_WEBHOOK_STANDARD_SIGNATURE_MAX];
    assert_int_equal(
        payd_webhook_sign_standard(secret, id, 1000, body, 2, signature, sizeof signature), 0);
    assert_int_equal(payd_webhook_verify_standard(secret, id, "1000", signature, body, 2, 1000, 0),
                     PAYD_WEBHOOK_OK);
    assert_int_equal(payd_webhook_verify_standard(secret, id, "1000", signature, "{ }", 3, 1000, 0),
                     PAYD_WEBHOOK_BAD_SIGNATURE);
    assert_int_equal(
        payd_webhook_verify_standard(secret, "msg_2", "1000", signature, body, 2, 1000, 0),
        PAYD_WEBHOOK_BAD_SIGNATURE);
    assert_int_equal(payd_webhook_verify_standard(secret, id, "1000", signature, body, 2, 1301, 0),
                     PAYD_WEBHOOK_TOO_OLD);
    assert_int_equal(payd_webhook_verify_standard(secret, id, "1000", signature, body, 2, 1030, 20),
                     PAYD_WEBHOOK_TOO_OLD);
    assert_int_equal(payd_webhook_verify_standard(secret, id, "10x0", signature, body, 2, 1000, 0),
                     PAYD_WEBHOOK_MALFORMED);
    assert_int_equal(
        payd_webhook_verify_standard(secret, NULL, "1000", signature, body, 2, 1000, 0),
        PAYD_WEBHOOK_MALFORMED);
    assert_int_equal(
        payd_webhook_verify_standard("whsec_*not base64*", id, "1000", signature, body, 2, 1000, 0),
        PAYD_WEBHOOK_MALFORMED);
    /* a signature under another secret, beside the right one (a rotation): accepted */
    char other[PAYD_WEBHOOK_STANDARD_SIGNATURE_MAX], both[128];
    assert_int_equal(
        payd_webhook_sign_standard("whsec_b3RoZXI=", id, 1000, body, 2, other, sizeof other), 0);
    snprintf(both, sizeof both, "%s %s", other, signature);
    assert_int_equal(payd_webhook_verify_standard(secret, id, "1000", both, body, 2, 1000, 0),
                     PAYD_WEBHOOK_OK);
    assert_int_equal(payd_webhook_verify_standard(secret, id, "1000", other, body, 2, 1000, 0),
                     PAYD_WEBHOOK_BAD_SIGNATURE);
    /* too small an output */
    assert_int_equal(payd_webhook_sign_standard(secret, id, 1000, body, 2, other, 40), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sign_gives_the_specifications_signature),
        cmocka_unit_test(test_every_verification_case),
        cmocka_unit_test(test_refusals_say_why),
    };
    return cmocka_run_group_tests(tests, load_vectors, free_vectors);
}

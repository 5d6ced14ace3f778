/* "livemode" on every object (core/livemode.h): after each "object" member naming a kind, never
 * on a list's envelope, inside metadata or inside a string, and never twice. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "core/livemode.h"

static void expect_marked(const char *in, bool live, const char *want)
{
    size_t len = 0;
    char *out = json_mark_livemode(in, strlen(in), live, &len);
    if (!want) {
        assert_null(out);
        return;
    }
    assert_non_null(out);
    assert_string_equal(out, want);
    assert_int_equal(len, strlen(want));
    free(out);
}

static void marks_an_object_after_its_kind(void **state)
{
    (void)state;
    expect_marked("{\"id\":\"pay_1\",\"object\":\"payment\",\"amount\":5}", true,
                  "{\"id\":\"pay_1\",\"object\":\"payment\",\"livemode\":true,\"amount\":5}");
    expect_marked("{\"object\":\"account\"}", false, "{\"object\":\"account\",\"livemode\":false}");
}

static void marks_every_object_of_a_list_but_the_list(void **state)
{
    (void)state;
    expect_marked("{\"object\":\"list\",\"data\":[{\"object\":\"order\"},{\"object\":\"order\"}],"
                  "\"has_more\":false}",
                  true,
                  "{\"object\":\"list\",\"data\":[{\"object\":\"order\",\"livemode\":true},"
                  "{\"object\":\"order\",\"livemode\":true}],\"has_more\":false}");
}

static void marks_an_event_and_the_object_it_holds(void **state)
{
    (void)state;
    expect_marked("{\"id\":\"evt_1\",\"object\":\"event\",\"data\":{\"object\":{\"object\":"
                  "\"refund\",\"n\":1}}}",
                  false,
                  "{\"id\":\"evt_1\",\"object\":\"event\",\"livemode\":false,\"data\":{\"object\":"
                  "{\"object\":\"refund\",\"livemode\":false,\"n\":1}}}");
}

static void leaves_metadata_strings_and_problems_alone(void **state)
{
    (void)state;
    /* a client's metadata key "object", a value that looks like a member, a problem */
    expect_marked(
        "{\"object\":\"payment\",\"metadata\":{\"object\":\"x\",\"k\":{\"object\":\"y\"}},"
        "\"description\":\"\\\"object\\\":\\\"z\\\"\"}",
        true,
        "{\"object\":\"payment\",\"livemode\":true,\"metadata\":{\"object\":\"x\",\"k\":{"
        "\"object\":\"y\"}},\"description\":\"\\\"object\\\":\\\"z\\\"\"}");
    expect_marked("{\"type\":\"about:blank\",\"status\":404,\"code\":\"resource_missing\"}", true,
                  NULL);
    expect_marked("{\"object\":\"list\",\"data\":[]}", true, NULL);
    expect_marked("", true, NULL);
    expect_marked("\"object\"", true, NULL);
}

static void never_marks_twice(void **state)
{
    (void)state;
    /* an object that says its own mode (an API key) is left as it is */
    expect_marked("{\"object\":\"api_key\",\"livemode\":false,\"mode\":\"test\"}", true, NULL);
    const char *in = "{\"object\":\"payment\",\"amount\":1}";
    size_t len;
    char *once = json_mark_livemode(in, strlen(in), true, &len);
    assert_non_null(once);
    assert_null(json_mark_livemode(once, len, true, &len));
    free(once);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(marks_an_object_after_its_kind),
        cmocka_unit_test(marks_every_object_of_a_list_but_the_list),
        cmocka_unit_test(marks_an_event_and_the_object_it_holds),
        cmocka_unit_test(leaves_metadata_strings_and_problems_alone),
        cmocka_unit_test(never_marks_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* payctl's own logic without a server: its CSV rows (cli/output.c, RFC 4180) and its command
 * table (cli/commands.c): every command can be reached and every option lands somewhere. The
 * two files are compiled in; the commands that run themselves are stubs here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../src/cli/commands.c"
#include "../../../src/cli/output.c"

int run_webhooks_create(invocation *inv)
{
    (void)inv;
    return EXIT_OK;
}
int run_listen(invocation *inv)
{
    (void)inv;
    return EXIT_OK;
}
int run_events_resend(invocation *inv)
{
    (void)inv;
    return EXIT_OK;
}
int run_webhooks_recover(invocation *inv)
{
    (void)inv;
    return EXIT_OK;
}
int run_trigger(invocation *inv)
{
    (void)inv;
    return EXIT_OK;
}

/* What write_csv_row writes for item_json, as a string (malloc'd). */
static char *csv_row(const char *item_json, int *status)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    *status = write_csv_row(out, item_json);
    fclose(out);
    return text;
}

static void test_a_payment_is_one_csv_row_quoted_where_needed(void **state)
{
    (void)state;
    int status;
    char *row = csv_row("{\"id\":\"pay_1\",\"amount\":1250,\"currency\":\"EUR\","
                        "\"description\":\"tea, \\\"green\\\"\\nand cake\","
                        "\"metadata\":{\"k\":\"v\"},\"order_id\":null,"
                        "\"capture_method\":\"manual\",\"amount_captured\":300}",
                        &status);
    assert_int_equal(status, 0);
    assert_string_equal(row, "pay_1,,,1250,EUR,,,,\"tea, \"\"green\"\"\nand cake\",,,"
                             "manual,300,,,\"{\"\"k\"\":\"\"v\"\"}\"\r\n");
    free(row);
    row = csv_row("[1, 2]", &status);
    assert_int_equal(status, -1); /* not a payment */
    free(row);
}

static bool path_has_placeholder(const command *c, const char *field)
{
    char placeholder[64];
    snprintf(placeholder, sizeof placeholder, "{%s}", field);
    for (int i = 0; i < 2; i++)
        if (c->paths[i] && strstr(c->paths[i], placeholder))
            return true;
    return false;
}

static void test_every_command_is_reachable_and_every_option_lands(void **state)
{
    (void)state;
    int commands = 0;
    for (const command *c = payctl_commands; c->group; c++, commands++) {
        for (const command *d = payctl_commands; d < c; d++)
            assert_false(!strcmp(c->group, d->group) && c->verb && d->verb &&
                         !strcmp(c->verb, d->verb)); /* one row per command */
        if (c->kind != COMMAND_REQUEST && !c->run)
            assert_non_null(c->paths[0]);
        bool positional_found = !c->positional;
        for (const option_spec *o = c->options; o && o->name; o++) {
            if (o->target == TO_PATH)
                assert_true(path_has_placeholder(c, o->field));
            if (c->positional && !strcmp(o->name, c->positional))
                positional_found = true;
        }
        assert_true(positional_found);
    }
    assert_true(commands > 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_payment_is_one_csv_row_quoted_where_needed),
        cmocka_unit_test(test_every_command_is_reachable_and_every_option_lands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

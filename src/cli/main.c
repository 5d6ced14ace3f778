/* payctl's entry point: read the command line against the command table, print help, set up
 * the client (URL, key, retry policy, --verbose), then hand over to run.c. */
#include "cli/cli.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/units.h"
#include "core/version.h"

#define DEFAULT_URL "http://127.0.0.1:8080"

/* Options every command takes. Values are read by name in configure_client(). */
const option_spec payctl_global_options[] = {
    {"url", "URL", VALUE_STRING, TO_PAYCTL, NULL, false,
     "server base URL (default: $PAYD_URL, else " DEFAULT_URL ")"},
    {"api-key", "KEY", VALUE_STRING, TO_PAYCTL, NULL, false, "API key (default: $PAYD_API_KEY)"},
    {"profile", "NAME", VALUE_STRING, TO_PAYCTL, NULL, false,
     "use [NAME] of ~/.config/payd/config (default: $PAYD_PROFILE, else [default])"},
    {"verbose", NULL, VALUE_NONE, TO_PAYCTL, NULL, false,
     "print every attempt to stderr: status, code and the delay chosen"},
    {"pretty", NULL, VALUE_NONE, TO_PAYCTL, NULL, false, "indent JSON output"},
    {"max-retries", "N", VALUE_INTEGER, TO_PAYCTL, NULL, false,
     "retries after the first attempt (default 4)"},
    {"retry-base", "DURATION", VALUE_STRING, TO_PAYCTL, NULL, false,
     "delay before the first retry, doubled for each next one (default 1s)"},
    {"max-delay", "DURATION", VALUE_STRING, TO_PAYCTL, NULL, false,
     "cap on that delay; a longer Retry-After gives up (default 30s)"},
    {"deadline", "DURATION", VALUE_STRING, TO_PAYCTL, NULL, false,
     "give up after this long, all attempts included (default 120s; 0s: none)"},
    {"timeout", "DURATION", VALUE_STRING, TO_PAYCTL, NULL, false,
     "limit for a single attempt (default 30s)"},
    {"help", NULL, VALUE_NONE, TO_PAYCTL, NULL, false, "show help for the command"},
    {0},
};

/* payctl request METHOD PATH [-d JSON]: any request the commands do not cover, with the same
 * retries, Idempotency-Key (a fresh one per POST unless given) and output. */
const option_spec payctl_request_options[] = {
    {"data", "JSON", VALUE_STRING, TO_PAYCTL, NULL, false, "the request body (also -d JSON)"},
    {"idempotency-key", "KEY", VALUE_STRING, TO_IDEMPOTENCY_KEY, NULL, false,
     "reuse this key instead of a fresh UUIDv4 (POST)"},
    {"if-match", "ETAG", VALUE_STRING, TO_IF_MATCH, NULL, false,
     "apply only if the ETag still matches"},
    {0},
};
static const command request_command = {
    "request",
    "",
    COMMAND_REQUEST,
    "",
    {"/", NULL},
    NULL,
    "Send any request: payctl request METHOD PATH [-d JSON]. METHOD is GET, HEAD, POST, PUT, "
    "PATCH or DELETE; PATH starts with / and may carry a query string.",
    payctl_request_options,
    NULL};

static int usage_error(const char *format, ...)
{
    va_list args;
    va_start(args, format);
    fputs("payctl: ", stderr);
    vfprintf(stderr, format, args);
    fputs("\n", stderr);
    va_end(args);
    return EXIT_USAGE;
}

/* ---- help ---- */

static void print_option_help(FILE *out, const option_spec *o)
{
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", o->name, o->metavar ? " " : "",
             o->metavar ? o->metavar : "");
    fprintf(out, "  %-28s %s%s\n", left, o->help, o->required ? " (required)" : "");
}

/* Lists show a command's first sentence only; its own help shows all of it. */
static int first_sentence_length(const char *text)
{
    const char *end = strstr(text, ". ");
    return end ? (int)(end - text + 1) : (int)strlen(text);
}

static void print_top_help(FILE *out)
{
    fprintf(out, "usage: payctl GROUP COMMAND [options]\n\n"
                 "payctl " PAYD_CLIENT_VERSION
                 ": the payd API from the command line. Prints JSON (JSON Lines for lists);\n"
                 "retries network failures, 5xx, 429 and 409 request_in_progress with the same\n"
                 "Idempotency-Key. Exit codes: 0 success, 1 refused by the server (4xx),\n"
                 "2 usage error, 3 gave up (network, 5xx or 429 after the retries).\n\n"
                 "commands:\n");
    for (const command *c = payctl_commands; c->group; c++) {
        char name[40];
        snprintf(name, sizeof name, "%s %s", c->group, c->verb);
        fprintf(out, "  %-22s %.*s\n", name, first_sentence_length(c->summary), c->summary);
    }
    fprintf(out, "  %-22s %.*s\n", "request METHOD PATH",
            first_sentence_length(request_command.summary), request_command.summary);
    fprintf(out, "  %-22s %s\n", "completion SHELL",
            "Print the completion script for bash, zsh or fish.");
    fprintf(out, "\nglobal options:\n");
    for (const option_spec *o = payctl_global_options; o->name; o++)
        print_option_help(out, o);
    fprintf(out, "\n'payctl GROUP COMMAND --help' shows a command's options; 'payctl --version' "
                 "the version.\n");
}

static void print_group_help(FILE *out, const char *group)
{
    fprintf(out, "usage: payctl %s COMMAND [options]\n\ncommands:\n", group);
    for (const command *c = payctl_commands; c->group; c++)
        if (strcmp(c->group, group) == 0)
            fprintf(out, "  %-12s %.*s\n", c->verb, first_sentence_length(c->summary), c->summary);
    fprintf(out, "\n'payctl %s COMMAND --help' shows a command's options.\n", group);
}

static void print_request_help(FILE *out)
{
    fprintf(out, "usage: payctl request METHOD PATH [-d JSON] [options]\n\n%s\n\noptions:\n",
            request_command.summary);
    for (const option_spec *o = payctl_request_options; o->name; o++)
        print_option_help(out, o);
    fprintf(out, "\nglobal options:\n");
    for (const option_spec *o = payctl_global_options; o->name; o++)
        print_option_help(out, o);
}

static void print_command_help(FILE *out, const command *c)
{
    fprintf(out, "usage: payctl %s%s%s", c->group, c->verb[0] ? " " : "", c->verb);
    if (c->positional)
        for (const option_spec *o = c->options; o->name; o++)
            if (strcmp(o->name, c->positional) == 0)
                fprintf(out, " %s%s%s", o->required ? "" : "[", o->metavar, o->required ? "" : "]");
    for (const option_spec *o = c->options; o->name; o++)
        if (o->required && !(c->positional && strcmp(o->name, c->positional) == 0))
            fprintf(out, " --%s %s", o->name, o->metavar);
    fprintf(out, " [options]\n\n%s\n", c->summary);
    fprintf(out, "request: %s %s", c->method, c->paths[0]);
    if (c->paths[1])
        fprintf(out, " or %s", c->paths[1]);
    fprintf(out, "\n\noptions:\n");
    for (const option_spec *o = c->options; o->name; o++)
        print_option_help(out, o);
    if (c->positional)
        fprintf(out, "  (--%s may also be given as a bare argument)\n", c->positional);
    fprintf(out, "\nglobal options:\n");
    for (const option_spec *o = payctl_global_options; o->name; o++)
        print_option_help(out, o);
}

/* ---- parsing ---- */

static const option_spec *find_option(const option_spec *list, const char *name, size_t len)
{
    for (const option_spec *o = list; o && o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

/* A switch takes no value. Known before the command is, so that "--all payments" and
 * "--account payments" can be told apart; every switch is a switch wherever it appears. */
static bool is_switch(const char *name, size_t len)
{
    const option_spec *o = find_option(payctl_global_options, name, len);
    for (const command *c = payctl_commands; !o && c->group; c++) {
        o = find_option(c->options, name, len);
        if (o && o->kind != VALUE_NONE)
            o = NULL;
    }
    return o && o->kind == VALUE_NONE;
}

typedef struct raw_option {
    const char *name; /* without the dashes, up to name_len */
    size_t name_len;
    const char *value;
} raw_option;

typedef struct parsed_line {
    raw_option options[64];
    size_t option_count;
    const char *positionals[8];
    size_t positional_count;
} parsed_line;

/* Splits argv into options and bare words; knows nothing about commands yet. */
static int split_arguments(int argc, char **argv, parsed_line *line)
{
    bool options_done = false;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!options_done && strcmp(arg, "--") == 0) {
            options_done = true;
            continue;
        }
        if (options_done || arg[0] != '-' || arg[1] == '\0') {
            if (line->positional_count == sizeof line->positionals / sizeof line->positionals[0])
                return usage_error("too many arguments");
            line->positionals[line->positional_count++] = arg;
            continue;
        }
        if (line->option_count == sizeof line->options / sizeof line->options[0])
            return usage_error("too many options");
        raw_option *o = &line->options[line->option_count++];
        if (strcmp(arg, "-h") == 0) {
            *o = (raw_option){"help", 4, NULL};
        } else if (strcmp(arg, "-v") == 0) {
            *o = (raw_option){"verbose", 7, NULL};
        } else if (strcmp(arg, "-d") == 0) {
            *o = (raw_option){"data", 4, i + 1 < argc ? argv[++i] : NULL};
        } else if (arg[1] != '-') {
            return usage_error("unknown option %s", arg);
        } else {
            o->name = arg + 2;
            const char *equals = strchr(o->name, '=');
            o->name_len = equals ? (size_t)(equals - o->name) : strlen(o->name);
            if (equals)
                o->value = equals + 1;
            else if (!is_switch(o->name, o->name_len) && i + 1 < argc)
                o->value = argv[++i];
        }
    }
    return EXIT_OK;
}

static bool is_integer(const char *text)
{
    char *end;
    if (!*text)
        return false;
    (void)strtoll(text, &end, 10);
    return *end == '\0';
}

static int add_given(invocation *inv, const option_spec *spec, const char *value)
{
    for (size_t i = 0; i < inv->given_count; i++)
        if (inv->given[i].spec == spec && spec->kind != VALUE_METADATA)
            return usage_error("--%s given twice", spec->name);
    if (spec->kind == VALUE_NONE && value)
        return usage_error("--%s takes no value", spec->name);
    if (spec->kind != VALUE_NONE && !value)
        return usage_error("--%s needs a value (%s)", spec->name, spec->metavar);
    if (spec->kind == VALUE_INTEGER && !is_integer(value))
        return usage_error("--%s takes an integer, not \"%s\"", spec->name, value);
    if (spec->kind == VALUE_METADATA && (!strchr(value, '=') || value[0] == '='))
        return usage_error("--%s takes KEY=VALUE, not \"%s\"", spec->name, value);
    inv->given[inv->given_count++] = (given_option){spec, value};
    return EXIT_OK;
}

static const command *find_command(const char *group, const char *verb, bool *group_known)
{
    *group_known = false;
    for (const command *c = payctl_commands; c->group; c++) {
        if (strcmp(c->group, group) != 0)
            continue;
        *group_known = true;
        if ((verb && strcmp(c->verb, verb) == 0) || (!verb && !c->verb[0])) /* "" : no verb */
            return c;
    }
    return NULL;
}

/* The options of line that belong to command c or are global, into inv. */
static int take_options(const parsed_line *line, const command *c, invocation *inv)
{
    for (size_t i = 0; i < line->option_count; i++) {
        const raw_option *raw = &line->options[i];
        const option_spec *spec = find_option(c->options, raw->name, raw->name_len);
        if (!spec)
            spec = find_option(payctl_global_options, raw->name, raw->name_len);
        if (!spec)
            return usage_error("unknown option --%.*s for \"%s%s%s\" (see --help)",
                               (int)raw->name_len, raw->name, c->group, c->verb[0] ? " " : "",
                               c->verb);
        int status = add_given(inv, spec, raw->value);
        if (status != EXIT_OK)
            return status;
    }
    return EXIT_OK;
}

static int parse_request_line(const parsed_line *line, bool wants_help, invocation *inv)
{
    if (wants_help) {
        print_request_help(stdout);
        return EXIT_OK;
    }
    if (line->positional_count != 3)
        return usage_error("usage: payctl request METHOD PATH [-d JSON] (see --help)");
    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
    const char *method = line->positionals[1], *path = line->positionals[2];
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (strcasecmp(method, methods[i]) == 0)
            snprintf(inv->request_method, sizeof inv->request_method, "%s", methods[i]);
    if (!inv->request_method[0])
        return usage_error("METHOD is GET, HEAD, POST, PUT, PATCH or DELETE, not \"%s\"", method);
    if (path[0] != '/' || strpbrk(path, " \r\n\t#"))
        return usage_error("PATH starts with / and holds no spaces, like /v1/accounts?limit=5, "
                           "not \"%s\"",
                           path);
    inv->command = &request_command;
    inv->request_path = path;
    int status = take_options(line, &request_command, inv);
    if (status != EXIT_OK)
        return status;
    if (option_given(inv, "data") &&
        (!strcmp(inv->request_method, "GET") || !strcmp(inv->request_method, "HEAD")))
        return usage_error("a %s request takes no body (-d)", inv->request_method);
    return -1;
}

/* payctl completion bash|zsh|fish: printed here, no server needed. */
static int parse_completion_line(const parsed_line *line, bool wants_help)
{
    static const char usage[] = "usage: payctl completion bash|zsh|fish\n\n"
                                "Print a completion script, written from this payctl's own "
                                "commands. bash: source <(payctl completion bash);\n"
                                "zsh: save it as _payctl in a directory of $fpath; fish: save "
                                "it as ~/.config/fish/completions/payctl.fish.\n";
    if (wants_help) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    /* other options (an alias's --profile, say) change nothing here */
    if (line->positional_count != 2 || print_completion(stdout, line->positionals[1]) != EXIT_OK) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* Fills inv from argv, or prints help. Returns -1 when the command should run. */
static int parse_command_line(int argc, char **argv, invocation *inv)
{
    parsed_line line = {0};
    int status = split_arguments(argc, argv, &line);
    if (status != EXIT_OK)
        return status;
    bool wants_help = false;
    for (size_t i = 0; i < line.option_count; i++)
        if (line.options[i].name_len == 4 && strncmp(line.options[i].name, "help", 4) == 0)
            wants_help = true;

    /* Only alone: "--version N" is also a write's optimistic-concurrency option. */
    for (size_t i = 0; i < line.option_count && line.positional_count == 0; i++)
        if (line.options[i].name_len == 7 && strncmp(line.options[i].name, "version", 7) == 0) {
            printf("payctl %s (git %s)\n", payd_version, payd_revision);
            return EXIT_OK;
        }

    if (line.positional_count == 0) {
        print_top_help(wants_help ? stdout : stderr);
        return wants_help ? EXIT_OK : EXIT_USAGE;
    }
    const char *group = line.positionals[0];
    if (strcmp(group, "request") == 0)
        return parse_request_line(&line, wants_help, inv);
    if (strcmp(group, "completion") == 0)
        return parse_completion_line(&line, wants_help);
    const char *verb = line.positional_count > 1 ? line.positionals[1] : NULL;
    bool group_known;
    const command *c = find_command(group, verb, &group_known);
    if (!c && verb) { /* a command without a verb may take a bare argument: `balance ACCOUNT` */
        const command *bare = find_command(group, NULL, &group_known);
        c = bare && bare->positional ? bare : NULL;
    }
    if (!group_known)
        return usage_error("unknown command group \"%s\" (see payctl --help)", group);
    if (!c) {
        if (wants_help && !verb) {
            print_group_help(stdout, group);
            return EXIT_OK;
        }
        print_group_help(stderr, group);
        return verb ? usage_error("unknown command \"%s %s\"", group, verb) : EXIT_USAGE;
    }
    if (wants_help) {
        print_command_help(stdout, c);
        return EXIT_OK;
    }

    inv->command = c;
    if ((status = take_options(&line, c, inv)) != EXIT_OK)
        return status;
    size_t bare_at = c->verb[0] ? 2 : 1; /* where the bare argument sits, after the verb */
    if (line.positional_count > bare_at + 1 ||
        (line.positional_count == bare_at + 1 && !c->positional))
        return usage_error("unexpected argument \"%s\"",
                           line.positionals[c->positional ? bare_at + 1 : bare_at]);
    if (line.positional_count == bare_at + 1) {
        const option_spec *spec = find_option(c->options, c->positional, strlen(c->positional));
        if ((status = add_given(inv, spec, line.positionals[bare_at])) != EXIT_OK)
            return status;
    }
    for (const option_spec *o = c->options; o->name; o++) {
        if (!o->required || option_given(inv, o->name))
            continue;
        if (c->positional && strcmp(o->name, c->positional) == 0)
            return usage_error("\"%s %s\" needs %s (see --help)", c->group, c->verb, o->metavar);
        return usage_error("\"%s %s\" needs --%s %s (see --help)", c->group, c->verb, o->name,
                           o->metavar);
    }
    return -1;
}

/* ---- the client ---- */

/* --verbose: one line per attempt, with what came back and what the client chose to do. */
static void print_attempt(void *ctx, const payd_attempt *a)
{
    char outcome[400];
    if (a->http_status)
        snprintf(outcome, sizeof outcome, "%d%s%s", a->http_status, a->code[0] ? " " : "", a->code);
    else
        snprintf(outcome, sizeof outcome, "no answer (%s)", a->error);
    fprintf(stderr, "payctl: attempt %d: %s %s -> %s in %" PRId64 " ms", a->attempt, a->method,
            a->path, outcome, a->elapsed_ms);
    if (a->retry_after_ms >= 0)
        fprintf(stderr, ", Retry-After %" PRId64 " ms", a->retry_after_ms);
    switch (a->next) {
    case PAYD_STEP_DONE:
        fprintf(stderr, "; done");
        break;
    case PAYD_STEP_RETRY:
        fprintf(stderr, "; retrying in %" PRId64 " ms", a->delay_ms);
        break;
    case PAYD_STEP_GIVE_UP:
        fprintf(stderr, "; giving up (%s)", payd_give_up_name(a->give_up));
        break;
    }
    if (a->idempotency_key[0])
        fprintf(stderr, " [Idempotency-Key %s]", a->idempotency_key);
    fputc('\n', stderr);
}

/* Without --verbose, one line as soon as the server cannot be reached, so a retrying payctl
 * is never silent: what failed, and that it is retrying. */
static void observe_attempt(void *ctx, const payd_attempt *a)
{
    invocation *inv = ctx;
    if (inv->verbose) {
        print_attempt(ctx, a);
        return;
    }
    if (a->http_status == 0 && a->next == PAYD_STEP_RETRY && !inv->told_unreachable) {
        inv->told_unreachable = true;
        fprintf(stderr,
                "payctl: cannot reach %s (%s); retrying (--max-retries 0 stops at once, "
                "--verbose shows each attempt)\n",
                inv->url, a->error);
    }
}

/* An http:// or https:// URL with a host; anything else is a usage error, not a network one. */
static bool valid_server_url(const char *url)
{
    const char *rest = NULL;
    if (strncasecmp(url, "http://", 7) == 0)
        rest = url + 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        rest = url + 8;
    return rest && *rest && *rest != '/' && !strpbrk(url, " \t\r\n");
}

static int read_duration(const invocation *inv, const char *name, int64_t *out)
{
    const char *text = option_value(inv, name);
    if (text && parse_duration_ms(text, out) != 0)
        return usage_error("--%s takes a duration with a unit (500ms, 30s, 2m), not \"%s\"", name,
                           text);
    return EXIT_OK;
}

/* Where the URL and key come from, highest first: --url/--api-key, $PAYD_URL/$PAYD_API_KEY, the
 * profile (--profile, $PAYD_PROFILE, or [default] when neither names one), the built-in URL. The
 * file is read only when a profile is named or something is still missing. */
static int resolve_server_and_key(invocation *inv, const char **url, const char **key)
{
    *url = option_value(inv, "url");
    if (!*url || !**url)
        *url = getenv("PAYD_URL");
    *key = option_value(inv, "api-key");
    if (!*key || !**key)
        *key = getenv("PAYD_API_KEY");
    const char *name = option_value(inv, "profile");
    if (!name)
        name = getenv("PAYD_PROFILE");
    bool named = name && *name;
    if (named || !*url || !**url || !*key || !**key) {
        int status = profile_load(named ? name : "default", named, &inv->profile);
        if (status != EXIT_OK)
            return status;
        if ((!*url || !**url) && inv->profile.url[0])
            *url = inv->profile.url;
        if ((!*key || !**key) && inv->profile.api_key[0])
            *key = inv->profile.api_key;
    }
    if (!*url || !**url)
        *url = DEFAULT_URL;
    return EXIT_OK;
}

static int configure_client(invocation *inv)
{
    const char *url, *key;
    int status = resolve_server_and_key(inv, &url, &key);
    if (status != EXIT_OK)
        return status;
    if (!valid_server_url(url))
        return usage_error("--url (or PAYD_URL, or the profile's url) must be http://HOST[:PORT] "
                           "or https://..., not \"%s\"",
                           url);
    inv->url = url;
    if (!key || !*key)
        return usage_error("no API key: set PAYD_API_KEY, pass --api-key or use a profile "
                           "(--profile)");

    payd_retry_policy policy;
    payd_retry_policy_default(&policy);
    const char *retries = option_value(inv, "max-retries");
    if (retries) {
        long n = strtol(retries, NULL, 10);
        policy.max_retries = n < 0 || n > 1000 ? -1 : (int)n; /* -1: refused just below */
    }
    if ((status = read_duration(inv, "retry-base", &policy.base_delay_ms)) != EXIT_OK ||
        (status = read_duration(inv, "max-delay", &policy.max_delay_ms)) != EXIT_OK ||
        (status = read_duration(inv, "deadline", &policy.deadline_ms)) != EXIT_OK ||
        (status = read_duration(inv, "timeout", &policy.attempt_timeout_ms)) != EXIT_OK)
        return status;

    inv->client = payd_client_new(url, key);
    if (!inv->client)
        return usage_error("cannot set up a client for %s", url);
    if (payd_client_set_retry_policy(inv->client, &policy) != PAYD_OK)
        return usage_error("invalid retry settings: retries 0-1000, --max-delay >= --retry-base, "
                           "durations at most 24h, --timeout above 0");
    inv->verbose = option_given(inv, "verbose");
    inv->pretty = option_given(inv, "pretty");
    payd_client_set_observer(inv->client, observe_attempt, inv);
    return EXIT_OK;
}

int main(int argc, char **argv)
{
    invocation inv = {0};
    int status = parse_command_line(argc, argv, &inv);
    if (status >= 0)
        return status;
    status = configure_client(&inv);
    if (status == EXIT_OK)
        status = run_command(&inv);
    payd_client_free(inv.client);
    return status;
}

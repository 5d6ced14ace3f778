/* Runs one parsed payctl command: builds the request from the command's row and the options
 * given, sends it through libpaydclient, prints the answer and chooses the exit code. */
#include "cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Items per page for export: the most §4 allows, so a walk takes the fewest requests. */
#define EXPORT_PAGE_SIZE "100"

const char *option_value(const invocation *inv, const char *name)
{
    const char *value = NULL;
    for (size_t i = 0; i < inv->given_count; i++)
        if (strcmp(inv->given[i].spec->name, name) == 0)
            value = inv->given[i].value;
    return value;
}

bool option_given(const invocation *inv, const char *name)
{
    for (size_t i = 0; i < inv->given_count; i++)
        if (strcmp(inv->given[i].spec->name, name) == 0)
            return true;
    return false;
}

/* The value given for the option that targets `placeholder` in the path, or NULL. */
static const char *path_value(const invocation *inv, const char *placeholder, size_t len)
{
    for (size_t i = 0; i < inv->given_count; i++) {
        const option_spec *s = inv->given[i].spec;
        if (s->target == TO_PATH && strlen(s->field) == len &&
            strncmp(s->field, placeholder, len) == 0)
            return inv->given[i].value;
    }
    return NULL;
}

/* Fills one path template, escaping each value. NULL when a placeholder has no value. */
static char *fill_path(const invocation *inv, const char *template)
{
    size_t cap = strlen(template) + 1;
    for (size_t i = 0; i < inv->given_count; i++)
        if (inv->given[i].value)
            cap += strlen(inv->given[i].value) * 3;
    char *path = malloc(cap), *w = path;
    if (!path)
        return NULL;
    for (const char *p = template; *p;) {
        if (*p != '{') {
            *w++ = *p++;
            continue;
        }
        const char *end = strchr(p, '}');
        const char *value = path_value(inv, p + 1, (size_t)(end - p - 1));
        char *escaped = value && *value ? payd_escape(value) : NULL;
        if (!escaped) {
            free(path);
            return NULL;
        }
        w = stpcpy(w, escaped);
        free(escaped);
        p = end + 1;
    }
    *w = '\0';
    return path;
}

static char *build_path(const invocation *inv)
{
    const command *c = inv->command;
    for (size_t i = 0; i < 2 && c->paths[i]; i++) {
        char *path = fill_path(inv, c->paths[i]);
        if (path)
            return path;
    }
    return NULL;
}

/* The JSON body from every option that targets it; NULL for a command without one. */
static int build_body(const invocation *inv, char **body_text)
{
    *body_text = NULL;
    const char *method = inv->command->method;
    if (strcmp(method, "POST") != 0 && strcmp(method, "PUT") != 0 && strcmp(method, "PATCH") != 0)
        return EXIT_OK; /* GET, HEAD and DELETE carry no body */
    json_t *body = json_object();
    for (size_t i = 0; body && i < inv->given_count; i++) {
        const option_spec *s = inv->given[i].spec;
        const char *value = inv->given[i].value;
        if (s->target != TO_BODY)
            continue;
        if (s->kind == VALUE_INTEGER) {
            json_object_set_new(body, s->field, json_integer(strtoll(value, NULL, 10)));
        } else if (s->kind == VALUE_METADATA) {
            json_t *map = json_object_get(body, s->field);
            if (!map)
                json_object_set_new(body, s->field, map = json_object());
            const char *equals = strchr(value, '=');
            char *key = strndup(value, (size_t)(equals - value));
            json_object_set_new(map, key, json_string(equals + 1));
            free(key);
        } else if (s->kind == VALUE_NONE) {
            json_object_set_new(body, s->field, json_true());
        } else {
            json_object_set_new(body, s->field, json_string(value));
        }
    }
    /* a switch that targets the body says false when it is not given (payments capture's
     * --final: without it the rest of the hold stays capturable) */
    for (const option_spec *s = inv->command->options; body && s->name; s++)
        if (s->kind == VALUE_NONE && s->target == TO_BODY && !json_object_get(body, s->field))
            json_object_set_new(body, s->field, json_false());
    *body_text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    if (!*body_text) {
        fputs("payctl: out of memory, or an option is not valid UTF-8\n", stderr);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* Query parameters from every option that targets the query string. */
static size_t build_query(const invocation *inv, payd_param *query, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < inv->given_count && n < cap; i++)
        if (inv->given[i].spec->target == TO_QUERY)
            query[n++] = (payd_param){inv->given[i].spec->field, inv->given[i].value};
    return n;
}

static const char *header_value(const invocation *inv, value_target target)
{
    for (size_t i = 0; i < inv->given_count; i++)
        if (inv->given[i].spec->target == target)
            return inv->given[i].value;
    return NULL;
}

/* §13: 0 success, 1 refused (a final 4xx), 2 usage, 3 gave up or could not finish. */
static int exit_code(const payd_result *r)
{
    switch (r->status) {
    case PAYD_OK:
        return EXIT_OK;
    case PAYD_ERR_USAGE:
        return EXIT_USAGE;
    case PAYD_ERR_HTTP:
        return r->retryable ? EXIT_GAVE_UP : EXIT_REFUSED;
    default:
        return EXIT_GAVE_UP;
    }
}

/* One line on stderr saying why a request failed. */
static void report_failure(const invocation *inv, const payd_result *r)
{
    char answer[400];
    if (r->http_status)
        snprintf(answer, sizeof answer, "%d %s%s%s", r->http_status, r->code,
                 r->message[0] ? ": " : "", r->message);
    else
        snprintf(answer, sizeof answer, "%s", r->message);
    if (r->status == PAYD_ERR_HTTP && !r->retryable)
        fprintf(stderr, "payctl: %s\n", answer);
    else if (r->retryable && !r->http_status)
        fprintf(stderr, "payctl: cannot reach %s: %s (gave up after %d attempt%s, %s)\n", inv->url,
                answer, r->attempts, r->attempts == 1 ? "" : "s", payd_give_up_name(r->give_up));
    else if (r->retryable)
        fprintf(stderr, "payctl: gave up after %d attempt%s (%s): %s\n", r->attempts,
                r->attempts == 1 ? "" : "s", payd_give_up_name(r->give_up), answer);
    else
        fprintf(stderr, "payctl: %s: %s\n", payd_status_name(r->status), answer);
    /* The outcome of a POST we gave up on is unknown; the same key resumes it without risk. */
    if (r->retryable && r->idempotency_key[0])
        fprintf(stderr, "payctl: to resume it safely, run it again with --idempotency-key %s\n",
                r->idempotency_key);
}

/* A refusal's problem+json (or a 5xx's answer) goes to stdout like any answer, so a script
 * reads the code from JSON whatever the command was. */
static void print_answer_body(const invocation *inv, const payd_result *r)
{
    if (r->body && r->body_len)
        print_json(stdout, r->body, r->body_len, inv->pretty);
}

static int run_single(invocation *inv, const char *method, const char *path, const char *body,
                      payd_param *query, size_t query_len)
{
    payd_request request = {.method = method,
                            .path = path,
                            .query = query,
                            .query_len = query_len,
                            .body = body,
                            .idempotency_key = header_value(inv, TO_IDEMPOTENCY_KEY),
                            .if_match = header_value(inv, TO_IF_MATCH)};
    payd_result result = {0};
    payd_call(inv->client, &request, &result);
    /* Whatever the server answered goes to stdout, a 402's failed payment included. */
    print_answer_body(inv, &result);
    if (result.status != PAYD_OK)
        report_failure(inv, &result);
    int code = exit_code(&result);
    payd_result_clear(&result);
    return code;
}

/* A list without --all: exactly one page, as items or as the page object. */
static int run_one_page(invocation *inv, const char *path, payd_param *query, size_t query_len,
                        bool as_page)
{
    payd_request request = {.method = "GET", .path = path, .query = query, .query_len = query_len};
    payd_result result = {0};
    if (payd_call(inv->client, &request, &result) != PAYD_OK) {
        print_answer_body(inv, &result);
        report_failure(inv, &result);
        int code = exit_code(&result);
        payd_result_clear(&result);
        return code;
    }
    json_t *page = json_loadb(result.body ? result.body : "", result.body_len, 0, NULL);
    json_t *data = json_object_get(page, "data");
    int code = EXIT_OK;
    if (!json_is_array(data)) {
        fputs("payctl: the answer is not a list page\n", stderr);
        code = EXIT_GAVE_UP;
    } else if (as_page) {
        print_json(stdout, result.body, result.body_len, inv->pretty);
    } else {
        size_t i;
        json_t *item;
        json_array_foreach(data, i, item)
        {
            char *text = json_dumps(item, JSON_COMPACT | JSON_ENCODE_ANY);
            if (text)
                puts(text);
            free(text);
        }
        const char *next = json_string_value(json_object_get(page, "next_cursor"));
        if (next && isatty(STDERR_FILENO))
            fprintf(stderr, "payctl: more items: add --cursor %s, or --all\n", next);
    }
    json_decref(page);
    payd_result_clear(&result);
    return code;
}

/* Walks every page with the iterator; each item goes to write_item. */
typedef int (*item_writer)(FILE *out, const char *item_json);

static int write_jsonl(FILE *out, const char *item_json)
{
    return fprintf(out, "%s\n", item_json) < 0 ? -1 : 0;
}

/* What a walk got through: for the progress line and the export summary. */
typedef struct walk_counts {
    long items, pages;
} walk_counts;

static int walk_all(invocation *inv, const char *path, payd_param *query, size_t query_len,
                    FILE *out, item_writer write_item, progress *shown, walk_counts *counts)
{
    payd_list *list = payd_list_open(inv->client, path, query, query_len);
    if (!list) {
        fputs("payctl: out of memory\n", stderr);
        return EXIT_GAVE_UP;
    }
    int code = EXIT_OK;
    const char *item;
    payd_status status;
    long written = 0;
    while ((status = payd_list_next(list, &item)) == PAYD_OK && item) {
        if (write_item(out, item) != 0) {
            fprintf(stderr, "payctl: cannot write: %s\n", strerror(errno));
            code = EXIT_GAVE_UP;
            break;
        }
        /* Counted once written, so the line never runs ahead of (or behind) the output. */
        written++;
        if (shown)
            progress_update(shown, written, payd_list_pages(list));
    }
    if (shown)
        progress_clear(shown);
    if (counts)
        *counts = (walk_counts){written, payd_list_pages(list)};
    if (code == EXIT_OK && status != PAYD_OK) {
        print_answer_body(inv, payd_list_result(list));
        report_failure(inv, payd_list_result(list));
        code = exit_code(payd_list_result(list));
    }
    payd_list_close(list);
    return code;
}

/* Opens a temporary file beside `target`, so the target appears only once complete. */
static FILE *open_beside(const char *target, char **temp_path)
{
    if (asprintf(temp_path, "%s.tmp.XXXXXX", target) < 0)
        return NULL;
    int fd = mkstemp(*temp_path);
    if (fd < 0) {
        free(*temp_path);
        *temp_path = NULL;
        return NULL;
    }
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask); /* mkstemp makes 0600; a plain file is what the user expects */
    FILE *file = fdopen(fd, "w");
    if (!file)
        close(fd);
    return file;
}

static int run_export(invocation *inv, const char *path, payd_param *query, size_t query_len)
{
    const char *format = option_value(inv, "format");
    bool csv = format && strcmp(format, "csv") == 0;
    if (format && !csv && strcmp(format, "jsonl") != 0) {
        fprintf(stderr, "payctl: --format is jsonl or csv, not \"%s\"\n", format);
        return EXIT_USAGE;
    }
    if (!option_given(inv, "limit"))
        query[query_len++] = (payd_param){"limit", EXPORT_PAGE_SIZE};

    const char *target = option_value(inv, "output");
    char *temp_path = NULL;
    FILE *out = stdout;
    if (target && !(out = open_beside(target, &temp_path))) {
        fprintf(stderr, "payctl: cannot write %s: %s\n", target, strerror(errno));
        return EXIT_GAVE_UP;
    }
    progress shown;
    progress_start(&shown);
    int code = EXIT_OK;
    if (csv && write_csv_header(out) != 0)
        code = EXIT_GAVE_UP;
    walk_counts counts = {0, 0};
    if (code == EXIT_OK)
        code = walk_all(inv, path, query, query_len, out, csv ? write_csv_row : write_jsonl, &shown,
                        &counts);
    if (fflush(out) != 0 || ferror(out)) {
        fprintf(stderr, "payctl: cannot write: %s\n", strerror(errno));
        code = code == EXIT_OK ? EXIT_GAVE_UP : code;
    }
    if (target) {
        if (fclose(out) != 0 && code == EXIT_OK)
            code = EXIT_GAVE_UP;
        if (code == EXIT_OK && rename(temp_path, target) != 0) {
            fprintf(stderr, "payctl: cannot write %s: %s\n", target, strerror(errno));
            code = EXIT_GAVE_UP;
        }
        if (code != EXIT_OK)
            unlink(temp_path);
        free(temp_path);
    }
    /* An export to a file is otherwise silent; to stdout the summary stays off the data. */
    progress_summary(&shown, counts.items, counts.pages, code == EXIT_OK ? target : NULL,
                     code == EXIT_OK);
    return code;
}

/* payctl request METHOD PATH [-d JSON]: the path is sent as given (its query string too). */
static int run_request(invocation *inv)
{
    const char *data = option_value(inv, "data");
    if (data) {
        json_error_t error;
        json_t *parsed = json_loads(data, JSON_DECODE_ANY, &error);
        json_decref(parsed);
        if (!parsed) {
            fprintf(stderr, "payctl: -d is not JSON: %s (column %d)\n", error.text, error.column);
            return EXIT_USAGE;
        }
    }
    return run_single(inv, inv->request_method, inv->request_path, data, NULL, 0);
}

int run_command(invocation *inv)
{
    const command *c = inv->command;
    if (c->run)
        return c->run(inv);
    if (c->kind == COMMAND_REQUEST) {
        int code = run_request(inv);
        if (fflush(stdout) != 0 && code == EXIT_OK)
            code = EXIT_GAVE_UP;
        return code;
    }
    char *path = build_path(inv);
    if (!path) {
        fprintf(stderr, "payctl: \"%s %s\" needs one of:", c->group, c->verb);
        for (const option_spec *o = c->options; o->name; o++)
            if (o->target == TO_PATH)
                fprintf(stderr, " --%s", o->name);
        fputs(" (see --help)\n", stderr);
        return EXIT_USAGE;
    }
    payd_param query[24];
    size_t query_len = build_query(inv, query, sizeof query / sizeof query[0] - 1);
    char *body = NULL;
    int code = build_body(inv, &body);
    if (code == EXIT_OK) {
        const char *format = option_value(inv, "format");
        switch (c->kind) {
        case COMMAND_SINGLE:
            code = run_single(inv, c->method, path, body, query, query_len);
            break;
        case COMMAND_LIST:
            if (format && strcmp(format, "page") != 0 && strcmp(format, "jsonl") != 0) {
                fprintf(stderr, "payctl: --format is jsonl or page, not \"%s\"\n", format);
                code = EXIT_USAGE;
            } else if (option_given(inv, "all")) {
                if (format && strcmp(format, "page") == 0) {
                    fputs("payctl: --format page shows one page; drop --all\n", stderr);
                    code = EXIT_USAGE;
                } else {
                    code = walk_all(inv, path, query, query_len, stdout, write_jsonl, NULL, NULL);
                }
            } else {
                code = run_one_page(inv, path, query, query_len,
                                    format && strcmp(format, "page") == 0);
            }
            break;
        case COMMAND_EXPORT:
            code = run_export(inv, path, query, query_len);
            break;
        case COMMAND_REQUEST: /* handled above */
            break;
        }
    }
    if (fflush(stdout) != 0 && code == EXIT_OK)
        code = EXIT_GAVE_UP;
    free(body);
    free(path);
    return code;
}

/* payctl: the command line for the payd API, built on libpaydclient (docs/api.md §13).
 *
 * Every command is a row of data (commands.c): its HTTP method and path, and for each option
 * where its value goes (a body field, a query parameter, a path placeholder, a header). One
 * generic runner (run.c) turns a parsed command line into a request, so adding a command is
 * adding a row. */
#ifndef PAYD_CLI_H
#define PAYD_CLI_H

#include <stdbool.h>
#include <stdio.h>

#include "payd/client.h"

/* Exit codes (§13). */
enum {
    EXIT_OK = 0,
    EXIT_REFUSED = 1, /* the server refused the request (a final 4xx) */
    EXIT_USAGE = 2,   /* the command line is wrong */
    EXIT_GAVE_UP = 3, /* network, 5xx or 429 after the retries, deadline, or a local failure */
};

typedef enum value_kind {
    VALUE_STRING,
    VALUE_INTEGER,  /* must be an integer; sent as a JSON number */
    VALUE_METADATA, /* KEY=VALUE, repeatable, gathered into one JSON object */
    VALUE_NONE,     /* a switch without a value */
} value_kind;

typedef enum value_target {
    TO_BODY,            /* JSON body field `field` */
    TO_QUERY,           /* query parameter `field` */
    TO_PATH,            /* fills {field} in the path */
    TO_IDEMPOTENCY_KEY, /* the Idempotency-Key header */
    TO_IF_MATCH,        /* the If-Match header */
    TO_PAYCTL,          /* read by payctl itself (--all, --format, --output) */
} value_target;

typedef struct option_spec {
    const char *name;    /* "account" for --account */
    const char *metavar; /* "ID" in the help */
    value_kind kind;
    value_target target;
    const char *field; /* body field, query parameter or path placeholder */
    bool required;
    const char *help;
} option_spec;

struct invocation;

typedef enum command_kind {
    COMMAND_SINGLE,  /* one request, its answer printed as JSON */
    COMMAND_LIST,    /* one page as JSON Lines, or every page with --all */
    COMMAND_EXPORT,  /* every page, to a file or stdout, as JSON Lines or CSV, with progress */
    COMMAND_REQUEST, /* payctl request METHOD PATH [-d JSON]: any request, printed as JSON */
} command_kind;

typedef struct command {
    const char *group; /* "payments" */
    const char *verb;  /* "create" */
    command_kind kind;
    const char *method;
    /* The first path whose {placeholders} all have values is used (transfers get: by id or
     * by biz_seq). */
    const char *paths[2];
    const char *positional; /* the option a bare argument fills ("payments get pay_…") */
    const char *summary;
    const option_spec *options;         /* ends with {0} */
    int (*run)(struct invocation *inv); /* non-NULL: the command runs itself (events.c) */
} command;

extern const command payctl_commands[];
/* main.c: the options every command takes, and those of `payctl request` */
extern const option_spec payctl_global_options[];
extern const option_spec payctl_request_options[];

/* An option as given on the command line. */
typedef struct given_option {
    const option_spec *spec;
    const char *value; /* NULL for a switch */
} given_option;

/* profile.c: a named URL and API key from the config file (docs/client.md, "Profiles") */
typedef struct profile {
    bool found; /* the file has the section */
    char url[512];
    char api_key[256];
} profile;

typedef struct invocation {
    const command *command;
    given_option given[64];
    size_t given_count;
    bool verbose;
    bool pretty;
    payd_client *client;
    /* payctl request: the method and path given on the command line */
    char request_method[8];
    const char *request_path;
    const char *url; /* the server, for messages */
    profile profile; /* --profile's (or [default]'s) URL and key, when the file has them */
    bool told_unreachable;
} invocation;

/* profile.c: reads section `name` of $XDG_CONFIG_HOME/payd/config (or ~/.config/payd/config). A
 * missing file or section is an error only when asked_for (--profile); a file that others may read
 * or write always is. Returns EXIT_OK or EXIT_USAGE, having said why. */
int profile_load(const char *name, bool asked_for, profile *out);

/* completion.c: prints the completion script for shell (bash, zsh or fish); EXIT_USAGE for
 * another shell. */
int print_completion(FILE *out, const char *shell);

/* run.c */
int run_command(invocation *inv);
/* The value of --name, or NULL when it was not given (the last one when repeated). */
const char *option_value(const invocation *inv, const char *name);
bool option_given(const invocation *inv, const char *name);

/* events.c: commands that run themselves */
int run_webhooks_create(invocation *inv);
int run_listen(invocation *inv);
/* resend.c: sending webhooks again */
int run_events_resend(invocation *inv);
int run_webhooks_recover(invocation *inv);
/* trigger.c */
int run_trigger(invocation *inv);

/* output.c */
/* Prints JSON text as one line (or indented when pretty); text that is not JSON as it is. */
void print_json(FILE *out, const char *text, size_t len, bool pretty);
/* One payment as a CSV row (RFC 4180: quoted when needed, CRLF). -1 if it is not an object. */
int write_csv_header(FILE *out);
int write_csv_row(FILE *out, const char *item_json);
/* The progress line of export, drawn only when stderr is a terminal. */
typedef struct progress {
    bool enabled;
    int64_t started_ms;
    long shown_pages;
} progress;
void progress_start(progress *p);
void progress_update(progress *p, long items, long pages);
void progress_clear(progress *p);
/* The line export ends with, on stderr: how many items, pages and seconds, and where to. */
void progress_summary(progress *p, long items, long pages, const char *target, bool complete);

#endif

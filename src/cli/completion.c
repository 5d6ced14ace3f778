/* payctl completion bash|zsh|fish: a completion script written from payctl's own command table
 * (commands.c) and option lists (main.c), so what a shell offers is what this binary takes.
 *
 * Every script works the same way: the bare words typed so far (skipping options and the
 * values of options that take one) name the group and the verb; a word starting with '-' is
 * completed from that command's options and the global ones; otherwise the next bare word is
 * a group, a verb of the group, or (for `request`) a method. */
#include "cli/cli.h"

#include <string.h>

static const char *const request_methods = "GET HEAD POST PUT PATCH DELETE";
static const char *const shells = "bash zsh fish";

/* Groups that are not rows of the command table. */
static const char *const extra_groups[] = {"request", "completion", NULL};

static bool group_seen_before(const command *c)
{
    for (const command *earlier = payctl_commands; earlier != c; earlier++)
        if (strcmp(earlier->group, c->group) == 0)
            return true;
    return false;
}

static void print_groups(FILE *out)
{
    const char *sep = "";
    for (const command *c = payctl_commands; c->group; c++)
        if (!group_seen_before(c)) {
            fprintf(out, "%s%s", sep, c->group);
            sep = " ";
        }
    for (size_t i = 0; extra_groups[i]; i++)
        fprintf(out, " %s", extra_groups[i]);
}

static void print_verbs(FILE *out, const char *group)
{
    const char *sep = "";
    for (const command *c = payctl_commands; c->group; c++)
        if (strcmp(c->group, group) == 0 && c->verb[0]) {
            fprintf(out, "%s%s", sep, c->verb);
            sep = " ";
        }
}

static void print_option_names(FILE *out, const option_spec *options, const char *sep)
{
    for (const option_spec *o = options; o && o->name; o++) {
        fprintf(out, "%s--%s", sep, o->name);
        sep = " ";
    }
}

/* Prints "|--name" once per name, however many lists hold it. */
static void print_once(FILE *out, const char *name, const char **seen, size_t *seen_count,
                       size_t cap)
{
    for (size_t i = 0; i < *seen_count; i++)
        if (strcmp(seen[i], name) == 0)
            return;
    if (*seen_count < cap)
        seen[(*seen_count)++] = name;
    fprintf(out, "|--%s", name);
}

/* The options that take a value, as a shell `case` pattern: their values are not bare words. */
static void print_value_options_pattern(FILE *out)
{
    const char *seen[256];
    size_t seen_count = 0, cap = sizeof seen / sizeof seen[0];
    fprintf(out, "-d");
    const option_spec *lists[] = {payctl_global_options, payctl_request_options};
    for (size_t i = 0; i < 2; i++)
        for (const option_spec *o = lists[i]; o->name; o++)
            if (o->kind != VALUE_NONE)
                print_once(out, o->name, seen, &seen_count, cap);
    for (const command *c = payctl_commands; c->group; c++)
        for (const option_spec *o = c->options; o->name; o++)
            if (o->kind != VALUE_NONE)
                print_once(out, o->name, seen, &seen_count, cap);
}

/* ---- bash and zsh: one function each, the command table as `case` branches ---- */

/* The body shared by bash and zsh: `typed` holds the bare words, `cur` the word being typed;
 * the shell's own part turns `candidates` into its completions. */
static void print_case_tables(FILE *out, const char *first, const char *second)
{
    fprintf(out, "    if [[ $cur == -* ]]; then\n        case \"%s %s\" in\n", first, second);
    for (const command *c = payctl_commands; c->group; c++) {
        if (c->verb[0])
            fprintf(out, "        \"%s %s\")", c->group, c->verb);
        else
            fprintf(out, "        \"%s \"*)", c->group);
        fprintf(out, " candidates=\"");
        print_option_names(out, c->options, "");
        fprintf(out, "\" ;;\n");
    }
    fprintf(out, "        \"request \"*) candidates=\"");
    print_option_names(out, payctl_request_options, "");
    fprintf(out, "\" ;;\n        esac\n        candidates=\"$candidates");
    print_option_names(out, payctl_global_options, " ");
    fprintf(out, "\"\n    elif [[ -z \"%s\" ]]; then\n        candidates=\"", first);
    print_groups(out);
    fprintf(out, "\"\n    elif [[ -z \"%s\" ]]; then\n        case \"%s\" in\n", second, first);
    for (const command *c = payctl_commands; c->group; c++)
        if (!group_seen_before(c) && c->verb[0]) {
            fprintf(out, "        %s) candidates=\"", c->group);
            print_verbs(out, c->group);
            fprintf(out, "\" ;;\n");
        }
    fprintf(out, "        request) candidates=\"%s\" ;;\n", request_methods);
    fprintf(out, "        completion) candidates=\"%s\" ;;\n        esac\n    fi\n", shells);
}

static void print_bash(FILE *out)
{
    fprintf(out, "# bash completion for payctl, written by `payctl completion bash` from its own "
                 "command table.\n"
                 "# Try it with: source <(payctl completion bash)\n"
                 "_payctl() {\n"
                 "    local cur=${COMP_WORDS[COMP_CWORD]} candidates=\"\" i\n"
                 "    local -a typed=()\n"
                 "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
                 "        case ${COMP_WORDS[i]} in\n"
                 "        -*) ;;\n"
                 "        *) case ${COMP_WORDS[i - 1]} in\n"
                 "               ");
    print_value_options_pattern(out);
    fprintf(out, ") ;;\n"
                 "               *) typed+=(\"${COMP_WORDS[i]}\") ;;\n"
                 "           esac ;;\n"
                 "        esac\n"
                 "    done\n");
    print_case_tables(out, "${typed[0]}", "${typed[1]}");
    fprintf(out, "    mapfile -t COMPREPLY < <(compgen -W \"$candidates\" -- \"$cur\")\n"
                 "}\n"
                 "complete -F _payctl payctl\n");
}

static void print_zsh(FILE *out)
{
    fprintf(out, "#compdef payctl\n"
                 "# zsh completion for payctl, written by `payctl completion zsh` from its own "
                 "command table.\n"
                 "# Install it as _payctl in a directory of $fpath, or: source <(payctl completion "
                 "zsh)\n"
                 "_payctl() {\n"
                 "    local cur=${words[CURRENT]} candidates=\"\" i\n"
                 "    local -a typed\n"
                 "    typed=()\n"
                 "    for ((i = 2; i < CURRENT; i++)); do\n"
                 "        case ${words[i]} in\n"
                 "        -*) ;;\n"
                 "        *) case ${words[i - 1]} in\n"
                 "               ");
    print_value_options_pattern(out);
    fprintf(out, ") ;;\n"
                 "               *) typed+=(\"${words[i]}\") ;;\n"
                 "           esac ;;\n"
                 "        esac\n"
                 "    done\n");
    print_case_tables(out, "${typed[1]}", "${typed[2]}");
    fprintf(out, "    compadd -- ${=candidates}\n"
                 "}\n"
                 "if [[ ${funcstack[1]} == _payctl ]]; then\n"
                 "    _payctl \"$@\"\n"
                 "else\n"
                 "    compdef _payctl payctl\n"
                 "fi\n");
}

/* ---- fish: one `complete` line per group, verb and option ---- */

/* text inside fish's single quotes, where only \ and ' are special */
static void print_fish_quoted(FILE *out, const char *text, size_t len)
{
    fputc('\'', out);
    for (size_t i = 0; i < len && text[i]; i++) {
        if (text[i] == '\'' || text[i] == '\\')
            fputc('\\', out);
        fputc(text[i], out);
    }
    fputc('\'', out);
}

static void print_fish_option(FILE *out, const char *condition, const option_spec *o)
{
    fprintf(out, "complete -c payctl");
    if (condition)
        fprintf(out, " -n '%s'", condition);
    fprintf(out, " -l %s%s -d ", o->name, o->kind == VALUE_NONE ? "" : " -r");
    print_fish_quoted(out, o->help, strlen(o->help));
    fputc('\n', out);
}

static void print_fish(FILE *out)
{
    fprintf(out, "# fish completion for payctl, written by `payctl completion fish` from its own "
                 "command table.\n"
                 "# Install it as payctl.fish in ~/.config/fish/completions, or: payctl "
                 "completion fish | source\n"
                 "complete -c payctl -f\n"
                 "complete -c payctl -n __fish_use_subcommand -a '");
    print_groups(out);
    fprintf(out, "'\n");
    char condition[256];
    for (const command *c = payctl_commands; c->group; c++) {
        if (!group_seen_before(c) && c->verb[0]) {
            fprintf(out,
                    "complete -c payctl -n '__fish_seen_subcommand_from %s; and not "
                    "__fish_seen_subcommand_from ",
                    c->group);
            print_verbs(out, c->group);
            fprintf(out, "' -a '");
            print_verbs(out, c->group);
            fprintf(out, "'\n");
        }
        if (c->verb[0]) {
            fprintf(out,
                    "complete -c payctl -n '__fish_seen_subcommand_from %s; and "
                    "__fish_seen_subcommand_from %s' -a %s -d ",
                    c->group, c->verb, c->verb);
            print_fish_quoted(out, c->summary, (size_t)strcspn(c->summary, "."));
            fputc('\n', out);
            snprintf(condition, sizeof condition,
                     "__fish_seen_subcommand_from %s; and __fish_seen_subcommand_from %s", c->group,
                     c->verb);
        } else {
            snprintf(condition, sizeof condition, "__fish_seen_subcommand_from %s", c->group);
        }
        for (const option_spec *o = c->options; o->name; o++)
            print_fish_option(out, condition, o);
    }
    fprintf(out, "complete -c payctl -n '__fish_seen_subcommand_from request' -a '%s'\n",
            request_methods);
    for (const option_spec *o = payctl_request_options; o->name; o++)
        print_fish_option(out, "__fish_seen_subcommand_from request", o);
    fprintf(out, "complete -c payctl -n '__fish_seen_subcommand_from completion' -a '%s'\n",
            shells);
    for (const option_spec *o = payctl_global_options; o->name; o++)
        print_fish_option(out, NULL, o);
}

int print_completion(FILE *out, const char *shell)
{
    if (shell && strcmp(shell, "bash") == 0)
        print_bash(out);
    else if (shell && strcmp(shell, "zsh") == 0)
        print_zsh(out);
    else if (shell && strcmp(shell, "fish") == 0)
        print_fish(out);
    else
        return EXIT_USAGE;
    return EXIT_OK;
}

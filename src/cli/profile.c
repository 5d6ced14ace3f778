/* Profiles: named pairs of server URL and API key in one small file, so a test key and a live
 * key live side by side (`payctl --profile test ...`). The file is INI-like:
 *
 *     # ~/.config/payd/config (or $XDG_CONFIG_HOME/payd/config), mode 600
 *     [default]
 *     url = http://127.0.0.1:8080
 *     api_key = ...
 *
 * Precedence, highest first: --url/--api-key, $PAYD_URL/$PAYD_API_KEY, the profile, the
 * built-in URL. As ssh does with a private key, a file that others may read or write is
 * refused: it holds secrets. */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LINE_MAX_BYTES 1024

/* Where the file is: $XDG_CONFIG_HOME/payd/config, else ~/.config/payd/config. */
static bool config_path(char *out, size_t cap)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && xdg[0] == '/')
        return (size_t)snprintf(out, cap, "%s/payd/config", xdg) < cap;
    const char *home = getenv("HOME");
    if (!home || !*home)
        return false;
    return (size_t)snprintf(out, cap, "%s/.config/payd/config", home) < cap;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *end = s + strlen(s);
    while (end > s && strchr(" \t\r\n", end[-1]))
        *--end = '\0';
    return s;
}

static int profile_error(const char *path, const char *format, const char *detail)
{
    fprintf(stderr, "payctl: %s: ", path);
    fprintf(stderr, format, detail);
    fputc('\n', stderr);
    return EXIT_USAGE;
}

/* Refuses a file another user owns, or that group or others may read or write. */
static int check_permissions(FILE *f, const char *path)
{
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        return profile_error(path, "cannot read its mode: %s", strerror(errno));
    if (st.st_uid != geteuid())
        return profile_error(path, "%s",
                             "owned by another user; it holds API keys, so it is "
                             "not used");
    if (st.st_mode & (S_IRWXG | S_IRWXO)) {
        char mode[8];
        snprintf(mode, sizeof mode, "%04o", (unsigned)(st.st_mode & 07777));
        return profile_error(path,
                             "mode %s lets others read or change it; it holds API keys, so it "
                             "is not used (chmod 600 it)",
                             mode);
    }
    return EXIT_OK;
}

/* Copies one `key = value` line of the wanted section into the profile. */
static int take_setting(const char *path, int line_no, char *line, profile *p)
{
    char *equals = strchr(line, '=');
    char where[64];
    snprintf(where, sizeof where, "%d", line_no);
    if (!equals)
        return profile_error(path, "line %s: expected key = value", where);
    *equals = '\0';
    const char *key = trim(line), *value = trim(equals + 1);
    char *target = strcmp(key, "url") == 0       ? p->url
                   : strcmp(key, "api_key") == 0 ? p->api_key
                                                 : NULL;
    size_t cap = target == p->url ? sizeof p->url : sizeof p->api_key;
    if (!target)
        return profile_error(path, "line %s: unknown setting (a profile holds url and api_key)",
                             where);
    if (strlen(value) >= cap)
        return profile_error(path, "line %s: value too long", where);
    strcpy(target, value);
    return EXIT_OK;
}

static int read_profile(FILE *f, const char *path, const char *name, profile *p)
{
    char line[LINE_MAX_BYTES];
    bool in_section = false;
    for (int line_no = 1; fgets(line, sizeof line, f); line_no++) {
        char *text = trim(line);
        if (!*text || *text == '#' || *text == ';')
            continue;
        if (*text == '[') {
            char *close = strchr(text, ']');
            if (!close || close[1])
                return profile_error(path, "a section header looks like [name], not %s", text);
            *close = '\0';
            in_section = strcmp(trim(text + 1), name) == 0;
            p->found |= in_section;
            continue;
        }
        if (!in_section)
            continue;
        int status = take_setting(path, line_no, text, p);
        if (status != EXIT_OK)
            return status;
    }
    return EXIT_OK;
}

int profile_load(const char *name, bool asked_for, profile *out)
{
    memset(out, 0, sizeof *out);
    char path[4096];
    if (!config_path(path, sizeof path)) {
        if (!asked_for)
            return EXIT_OK;
        fprintf(stderr, "payctl: --profile %s: no config file (set HOME or XDG_CONFIG_HOME)\n",
                name);
        return EXIT_USAGE;
    }
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT && !asked_for)
            return EXIT_OK;
        fprintf(stderr, "payctl: --profile %s: cannot read %s: %s\n", name, path, strerror(errno));
        return EXIT_USAGE;
    }
    int status = check_permissions(f, path);
    if (status == EXIT_OK)
        status = read_profile(f, path, name, out);
    fclose(f);
    if (status == EXIT_OK && asked_for && !out->found) {
        fprintf(stderr, "payctl: --profile %s: %s has no [%s] section\n", name, path, name);
        return EXIT_USAGE;
    }
    return status;
}

#include <stdio.h>
#include <string.h>

#include "request/route.h"

/* Matches one pattern against a path, capturing {name} segments. Patterns and paths are
 * compared segment by segment; a capture never matches an empty segment. */
static bool pattern_matches(const char *pattern, const char *path, arena *a,
                            const char *params[MAX_PATH_PARAMS])
{
    int n = 0;
    const char *p = pattern, *s = path;
    while (*p && *s) {
        if (*p == '{') {
            const char *close = strchr(p, '}');
            const char *end = strchr(s, '/');
            size_t len = end ? (size_t)(end - s) : strlen(s);
            if (len == 0 || n == MAX_PATH_PARAMS)
                return false;
            if (params)
                params[n] = arena_strndup(a, s, len);
            n++;
            p = close + 1;
            s += len;
        } else if (*p == *s) {
            p++;
            s++;
        } else {
            return false;
        }
    }
    return *p == '\0' && *s == '\0';
}

route_match_result route_match(const route *routes, int count, const char *method, const char *path,
                               arena *a, const route **out, const char *params[MAX_PATH_PARAMS],
                               char *allow, size_t allow_len)
{
    bool path_known = false;
    /* HEAD is a GET without the body (libmicrohttpd drops the body of a HEAD answer) */
    const char *wanted = strcmp(method, "HEAD") ? method : "GET";
    if (allow_len)
        allow[0] = '\0';
    for (int i = 0; i < count; i++) {
        const route *r = &routes[i];
        if (!pattern_matches(r->pattern, path, a, NULL))
            continue;
        if (!strcmp(r->method, wanted)) {
            pattern_matches(r->pattern, path, a, params);
            *out = r;
            return ROUTE_MATCHED;
        }
        if (allow_len && !strstr(allow, r->method)) {
            size_t used = strlen(allow);
            snprintf(allow + used, allow_len - used, "%s%s%s", used ? ", " : "", r->method,
                     strcmp(r->method, "GET") ? "" : ", HEAD");
        }
        path_known = true;
    }
    return path_known ? ROUTE_WRONG_METHOD : ROUTE_NO_PATH;
}

/* The request pipeline's edge, from raw bytes: request line, headers, query and body go through
 * the same route table and the same checks payd runs before any handler (http/validate.c,
 * request/router.c, api/routes.c). Handlers are stubs: nothing here reaches a store.
 *
 * The input is parsed the way libmicrohttpd 0.9.75 hands it over: header values are C strings
 * cut at a NUL (the field is then flagged as the server flags it), query arguments are
 * percent-decoded with their lengths, so a %00 stays inside the value.
 *
 * Invariants: whatever the checks let through has no control byte in a header or query value,
 * no repeated singleton header or query parameter, only the route's declared query names, and
 * a body that is one JSON object; a refusal names a printable param and maps to a 4xx problem. */
// fuzz-sources: src/http/validate.c src/request/router.c src/request/problem.c
// fuzz-sources: src/api/routes.c src/api/enums.c handler-stubs
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/routes.h"
#include "request/problem.h"
#include "http/validate.h"
#include "request/route.h"

#define MAX_FIELDS 64

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) in place (into out); returns the decoded length. */
static size_t decode(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
            out[o++] = (char)(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
            i += 2;
        } else {
            out[o++] = s[i] == '+' ? ' ' : s[i];
        }
    }
    return o;
}

static bool has_control(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return true;
    }
    return false;
}

/* The headers the checks below hold to "at most once" (payd's own list is request/input.c's). */
static const char *const singletons[] = {
    "Authorization", "Idempotency-Key", "If-Match", "If-None-Match",
    "Content-Type",  "Content-Length",  NULL};

static void check_param_printable(const edge_verdict *v)
{
    for (const char *p = v->param; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            abort();
    int status = problem_lookup(error_of_refusal(v->err))->status;
    if (status < 400 || status > 499)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *end = buf + size;

    /* request line */
    char *eol = memchr(buf, '\n', size);
    if (!eol)
        goto done;
    *eol = '\0';
    char *method = buf, *sp = strchr(buf, ' ');
    if (!sp)
        goto done;
    *sp = '\0';
    char *target = sp + 1, *sp2 = strchr(target, ' ');
    if (sp2)
        *sp2 = '\0';
    char *query = strchr(target, '?');
    if (query)
        *query++ = '\0';

    /* headers, as the library hands them over */
    http_field headers[MAX_FIELDS];
    size_t nh = 0;
    char *line = eol + 1;
    while (line < end && nh < MAX_FIELDS) {
        char *next = memchr(line, '\n', (size_t)(end - line));
        char *line_end = next ? next : end;
        if (line_end > line && line_end[-1] == '\r')
            line_end--;
        if (line_end == line) {
            line = next ? next + 1 : end;
            break;
        }
        *line_end = '\0';
        char *colon = memchr(line, ':', (size_t)(line_end - line));
        if (colon) {
            *colon = '\0';
            char *value = colon + 1;
            while (*value == ' ')
                value++;
            size_t raw_len = (size_t)(line_end - value), cut_len = strlen(value);
            headers[nh++] = (http_field){line, strlen(line), value, cut_len, cut_len < raw_len};
        }
        line = next ? next + 1 : end;
    }
    const char *body = line < end ? line : "";
    size_t body_len = line < end ? (size_t)(end - line) : 0;

    /* query arguments, decoded with their lengths */
    http_field args[MAX_FIELDS];
    size_t na = 0;
    for (char *q = query; q && *q && na < MAX_FIELDS;) {
        char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        char *eq = memchr(q, '=', n);
        size_t key_raw = eq ? (size_t)(eq - q) : n;
        char *key = malloc(key_raw + 1), *value = NULL;
        size_t key_len = decode(q, key_raw, key), value_len = 0;
        key[key_len] = '\0';
        if (eq) {
            value = malloc(n - key_raw);
            value_len = decode(eq + 1, n - key_raw - 1, value);
            value[value_len] = '\0';
        }
        args[na++] = (http_field){key, key_len, value, value_len, false};
        q = amp ? amp + 1 : q + n;
    }

    arena a;
    arena_init(&a);
    const route *r = NULL;
    const char *params[MAX_PATH_PARAMS];
    char allow[96];
    route_match_result m = route_match(payd_routes, payd_route_count, method, target, &a, &r,
                                       params, allow, sizeof allow);
    edge_verdict v;
    (void)edge_framing_conflict(headers, nh);
    if (edge_check_headers(headers, nh, singletons, &v)) {
        for (size_t i = 0; i < nh; i++) {
            if (headers[i].cut_at_nul || has_control(headers[i].value, headers[i].value_len))
                abort();
            for (size_t s = 0; singletons[s]; s++)
                for (size_t j = 0; j < i; j++)
                    if (headers[i].name_len == strlen(singletons[s]) &&
                        headers[j].name_len == headers[i].name_len &&
                        !strncasecmp(headers[i].name, singletons[s], headers[i].name_len) &&
                        !strncasecmp(headers[j].name, singletons[s], headers[j].name_len))
                        abort();
        }
    } else {
        check_param_printable(&v);
    }
    if (m == ROUTE_MATCHED) {
        if (edge_check_query(args, na, r->query, &v)) {
            for (size_t i = 0; i < na; i++) {
                bool declared = false;
                for (int d = 0; r->query && d < r->query->count; d++) {
                    const char *name = r->query->fields[d].name;
                    declared |= args[i].name_len == strlen(name) &&
                                !memcmp(args[i].name, name, args[i].name_len);
                }
                if (!declared || (args[i].value && has_control(args[i].value, args[i].value_len)))
                    abort();
            }
        } else {
            check_param_printable(&v);
        }
        if (r->flags & ROUTE_JSON_BODY) {
            const char *ct = NULL;
            for (size_t i = 0; i < nh; i++)
                if (!strcasecmp(headers[i].name, "Content-Type"))
                    ct = headers[i].value;
            json_t *j = NULL;
            char detail[256];
            if (edge_parse_body(ct, body, body_len, body_len > 65536, &j, &v, detail,
                                sizeof detail)) {
                if (!json_is_object(j))
                    abort();
            } else if (j) {
                abort();
            }
            json_decref(j);
        }
    }
    arena_free(&a);
    for (size_t i = 0; i < na; i++) {
        free((char *)args[i].name);
        free((char *)args[i].value);
    }
done:
    free(buf);
    return 0;
}

#include "http/schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "core/timefmt.h"

#define ID_TEXT_MAX       64
#define METADATA_NAME_MAX 40
#define METADATA_TEXT_MAX 500
/* The lowercase Crockford base32 digits of an id (core/ids.c), as the document writes them. */
#define ID_DIGITS_PATTERN "[0-9a-hjkmnp-tv-z]{13}"

static bool refuse(input_error *e, const field *f, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool refuse(input_error *e, const field *f, const char *fmt, ...)
{
    e->err = f->err != HTTP_REFUSAL_NONE ? f->err : HTTP_REFUSAL_INVALID_PARAMETER;
    e->param = f->name;
    if (f->detail) {
        snprintf(e->detail, sizeof e->detail, "%s", f->detail);
    } else {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->detail, sizeof e->detail, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* A JSON string of min..max bytes without a NUL inside. */
static bool string_within(json_t *v, int64_t min, int64_t max)
{
    if (!json_is_string(v))
        return false;
    int64_t len = (int64_t)json_string_length(v);
    return len >= min && len <= max && strlen(json_string_value(v)) == (size_t)len;
}

/* Is c in a regex-style class such as "A-Za-z0-9_-"? */
static bool in_class(const char *cls, char c)
{
    for (const char *p = cls; *p; p++) {
        if (p[1] == '-' && p[2]) {
            if (c >= p[0] && c <= p[2])
                return true;
            p += 2;
        } else if (*p == c) {
            return true;
        }
    }
    return false;
}

static bool token_ok(const field *f, const char *s)
{
    size_t plen = f->prefix ? strlen(f->prefix) : 0;
    if (plen && strncmp(s, f->prefix, plen) != 0)
        return false;
    s += plen;
    int64_t n = 0;
    for (; s[n]; n++)
        if (!in_class(f->chars, s[n]))
            return false;
    return n >= f->min && n <= f->max;
}

static bool email_ok(const char *s)
{
    const char *at = strchr(s, '@');
    return at && at != s && at[1] && !strchr(at + 1, '@') && !strpbrk(s, " \t\r\n");
}

static bool metadata_ok(const field *f, json_t *v)
{
    if (!json_is_object(v) || (int64_t)json_object_size(v) > f->max)
        return false;
    const char *k;
    json_t *m;
    json_object_foreach(v, k, m)
    {
        if (strlen(k) > METADATA_NAME_MAX || !string_within(m, 0, METADATA_TEXT_MAX))
            return false;
    }
    return true;
}

static void list_values(const char *const *values, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (const char *const *v = values; *v && len < cap; v++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", v == values ? "" : ", ", *v);
}

/* Decodes one given (non-null) value into slot. */
static bool decode_value(const field *f, json_t *v, char *slot, arena *a, input_error *e)
{
    const char *name = f->name;
    const char *s = json_string_value(v);
    switch (f->kind) {
    case KIND_STRING:
        if (!string_within(v, f->min, f->max))
            return refuse(e, f, "'%s' must be a string of %lld to %lld characters", name,
                          (long long)f->min, (long long)f->max);
        *(const char **)slot = arena_strdup(a, s);
        return true;
    case KIND_TOKEN:
        if (!string_within(v, 1, INT32_MAX) || !token_ok(f, s))
            return refuse(e, f, "'%s' must be %s%lld to %lld of [%s]", name,
                          f->prefix ? f->prefix : "", (long long)f->min, (long long)f->max,
                          f->chars);
        *(const char **)slot = arena_strdup(a, s);
        return true;
    case KIND_ID: {
        if (!string_within(v, 1, ID_TEXT_MAX))
            return refuse(e, f, "'%s' must be an id such as %s_03b4473zr0000", name, f->prefix);
        input_id *id = (input_id *)slot;
        id->text = arena_strdup(a, s);
        if (id_parse(s, f->prefix, &id->id) != 0)
            id->id = 0; /* names nothing: the handler answers 404 as for any missing one */
        return true;
    }
    case KIND_ENUM:
        for (const char *const *c = f->values; s && *c; c++) {
            if (!strcmp(*c, s) && strlen(s) == json_string_length(v)) {
                *(const char **)slot = *c;
                return true;
            }
        }
        char choices[160];
        list_values(f->values, choices, sizeof choices);
        return refuse(e, f, "'%s' must be one of %s", name, choices);
    case KIND_INTEGER:
        if (!json_is_integer(v) || json_integer_value(v) < f->min || json_integer_value(v) > f->max)
            return refuse(e, f, "'%s' must be an integer from %lld to %lld", name,
                          (long long)f->min, (long long)f->max);
        *(int64_t *)slot = json_integer_value(v);
        return true;
    case KIND_BOOLEAN:
        if (!json_is_boolean(v))
            return refuse(e, f, "'%s' must be true or false", name);
        *(int *)slot = json_is_true(v);
        return true;
    case KIND_METADATA: {
        if (!metadata_ok(f, v))
            return refuse(e, f,
                          "'%s' maps at most %lld names of up to %d characters to strings of "
                          "up to %d",
                          name, (long long)f->max, METADATA_NAME_MAX, METADATA_TEXT_MAX);
        char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
        *(const char **)slot = arena_strdup(a, text);
        free(text);
        return true;
    }
    case KIND_EMAIL:
        if (!string_within(v, f->min, f->max) || !email_ok(s))
            return refuse(e, f, "'%s' must be an email address of %lld to %lld characters", name,
                          (long long)f->min, (long long)f->max);
        *(const char **)slot = arena_strdup(a, s);
        return true;
    case KIND_TIME: {
        input_time *t = (input_time *)slot;
        if (!string_within(v, 1, 64) || parse_rfc3339(s, &t->us) != 0)
            return refuse(e, f, "'%s' must be an RFC 3339 time", name);
        t->text = arena_strdup(a, s);
        return true;
    }
    case KIND_CUSTOM: {
        bool array = !strcmp(f->type, "array");
        if (array ? !json_is_array(v) || (int64_t)json_array_size(v) < f->min ||
                        (int64_t)json_array_size(v) > f->max
                  : !string_within(v, f->min, f->max))
            return refuse(e, f, "'%s' must be %s of %lld to %lld %s", name,
                          array ? "a list" : "a string", (long long)f->min, (long long)f->max,
                          array ? "items" : "characters");
        const char *detail = NULL;
        if (!f->check(f, v, slot, a, &detail))
            return refuse(e, f, "%s", detail ? detail : "not a valid value");
        return true;
    }
    }
    return refuse(e, f, "'%s' is not valid", name);
}

/* A field not given: required → missing_parameter; else its `absent` value. */
static bool absent(const field *f, char *slot, input_error *e)
{
    if (f->required) {
        e->err = HTTP_REFUSAL_MISSING_PARAMETER;
        e->param = f->name;
        snprintf(e->detail, sizeof e->detail, "'%s' is required", f->name);
        return false;
    }
    if (f->kind == KIND_INTEGER)
        *(int64_t *)slot = f->absent;
    else if (f->kind == KIND_BOOLEAN)
        *(int *)slot = (int)f->absent;
    return true;
}

bool schema_decode_body(const schema *s, json_t *body, void *out, arena *a, input_error *e)
{
    const char *name;
    json_t *value;
    json_object_foreach(body, name, value)
    {
        bool known = false;
        for (int i = 0; i < s->count && !known; i++)
            known = !strcmp(s->fields[i].name, name);
        if (!known) {
            e->err = HTTP_REFUSAL_UNKNOWN_PARAMETER;
            e->param = arena_strdup(a, name);
            snprintf(e->detail, sizeof e->detail, "'%.100s' is not a parameter of this request",
                     name);
            return false;
        }
    }
    for (int i = 0; i < s->count; i++) {
        const field *f = &s->fields[i];
        char *slot = (char *)out + f->at;
        value = json_object_get(body, f->name);
        bool ok = !value || json_is_null(value) ? absent(f, slot, e) /* null: not given */
                                                : decode_value(f, value, slot, a, e);
        if (!ok)
            return false;
    }
    return true;
}

/* A query value as the JSON its kind reads: digits for an integer, else the text. */
static json_t *query_value(const field *f, const char *text)
{
    if (f->kind != KIND_INTEGER)
        return json_string(text);
    char *end;
    long long v = strtoll(text, &end, 10);
    return *text && !*end ? json_integer(v) : json_string(text); /* a string is refused */
}

bool schema_decode_query(const schema *s, const char *(*lookup)(void *ctx, const char *name),
                         void *ctx, void *out, arena *a, input_error *e)
{
    for (int i = 0; i < s->count; i++) {
        const field *f = &s->fields[i];
        char *slot = (char *)out + f->at;
        const char *text = lookup(ctx, f->name);
        if (!text)
            text = f->dflt;
        if (!text) {
            if (!absent(f, slot, e))
                return false;
            continue;
        }
        json_t *v = query_value(f, text);
        bool ok = v && decode_value(f, v, slot, a, e);
        json_decref(v);
        if (!ok)
            return v ? false : refuse(e, f, "'%s' is not valid text", f->name);
    }
    return true;
}

bool schema_field_accepts(const field *f, const char *text)
{
    arena a;
    arena_init(&a);
    void *slot = arena_alloc(&a, f->size > 16 ? f->size : 16); /* 16: the largest kind's value */
    input_error e;
    json_t *v = query_value(f, text);
    bool ok = v && decode_value(f, v, slot, &a, &e);
    json_decref(v);
    arena_free(&a);
    return ok;
}

/* ---- the tables as JSON Schema ---- */

static void set_length(json_t *o, const char *min_key, const char *max_key, const field *f)
{
    if (f->min > 0)
        json_object_set_new(o, min_key, json_integer(f->min));
    json_object_set_new(o, max_key, json_integer(f->max));
}

static json_t *values_json(const char *const *values)
{
    json_t *out = json_array();
    for (const char *const *v = values; *v; v++)
        json_array_append_new(out, json_string(*v));
    return out;
}

static json_t *field_json(const field *f)
{
    json_t *o = json_object();
    const char *type = "string";
    switch (f->kind) {
    case KIND_STRING:
        set_length(o, "minLength", "maxLength", f);
        break;
    case KIND_TOKEN:
        json_object_set_new(o, "pattern",
                            json_sprintf("^%s[%s]{%lld,%lld}$", f->prefix ? f->prefix : "",
                                         f->chars, (long long)f->min, (long long)f->max));
        break;
    case KIND_ID:
        json_object_set_new(o, "pattern", json_sprintf("^%s_" ID_DIGITS_PATTERN "$", f->prefix));
        break;
    case KIND_ENUM:
        json_object_set_new(o, "enum", values_json(f->values));
        break;
    case KIND_INTEGER:
        type = "integer";
        json_object_set_new(o, "minimum", json_integer(f->min));
        if (f->max != INT64_MAX)
            json_object_set_new(o, "maximum", json_integer(f->max));
        if (f->max > INT32_MAX) /* OpenAPI's name for a range past 32 bits */
            json_object_set_new(o, "format", json_string("int64"));
        break;
    case KIND_BOOLEAN:
        type = "boolean";
        break;
    case KIND_METADATA:
        type = "object";
        json_object_set_new(o, "maxProperties", json_integer(f->max));
        json_object_set_new(o, "propertyNames", json_pack("{s:i}", "maxLength", METADATA_NAME_MAX));
        json_object_set_new(
            o, "additionalProperties",
            json_pack("{s:s, s:i}", "type", "string", "maxLength", METADATA_TEXT_MAX));
        break;
    case KIND_EMAIL:
        json_object_set_new(o, "format", json_string("email"));
        set_length(o, "minLength", "maxLength", f);
        break;
    case KIND_TIME:
        json_object_set_new(o, "format", json_string("date-time"));
        break;
    case KIND_CUSTOM:
        type = f->type;
        if (!strcmp(type, "array")) {
            set_length(o, "minItems", "maxItems", f);
            if (f->values)
                json_object_set_new(o, "items", json_pack("{s:o}", "enum", values_json(f->values)));
        } else {
            set_length(o, "minLength", "maxLength", f);
        }
        break;
    }
    json_object_set_new(o, "type", json_string(type));
    if (f->format)
        json_object_set_new(o, "format", json_string(f->format));
    if (f->pattern)
        json_object_set_new(o, "pattern", json_string(f->pattern));
    if (f->dflt) {
        json_t *d = query_value(f, f->dflt);
        json_object_set_new(o, "default", d);
    }
    return o;
}

json_t *schema_body_json(const schema *s)
{
    json_t *props = json_object(), *required = json_array();
    for (int i = 0; i < s->count; i++) {
        const field *f = &s->fields[i];
        json_t *p = field_json(f);
        if (f->required)
            json_array_append_new(required, json_string(f->name));
        else /* a null is taken as not given */
            p = json_pack("{s:[o, {s:s}]}", "anyOf", p, "type", "null");
        json_object_set_new(props, f->name, p);
    }
    return json_pack("{s:s, s:b, s:o, s:o}", "type", "object", "additionalProperties", 0,
                     "required", required, "properties", props);
}

json_t *schema_query_json(const schema *s)
{
    json_t *out = json_object();
    for (int i = 0; i < s->count; i++)
        json_object_set_new(out, s->fields[i].name, field_json(&s->fields[i]));
    return out;
}

/* The size of the C value each kind decodes to; 0 when the kind does not say. */
static size_t kind_size(field_kind k)
{
    switch (k) {
    case KIND_STRING:
    case KIND_TOKEN:
    case KIND_ENUM:
    case KIND_METADATA:
    case KIND_EMAIL:
        return sizeof(const char *);
    case KIND_ID:
        return sizeof(input_id);
    case KIND_INTEGER:
        return sizeof(int64_t);
    case KIND_BOOLEAN:
        return sizeof(int);
    case KIND_TIME:
        return sizeof(input_time);
    case KIND_CUSTOM:
        return 0;
    }
    return 0;
}

const char *schema_layout_error(const schema *s)
{
    for (int i = 0; i < s->count; i++) {
        const field *f = &s->fields[i];
        size_t want = kind_size(f->kind);
        if ((want && f->size != want) || f->at + f->size > s->size)
            return f->name;
        if ((f->kind == KIND_ENUM && !f->values) || (f->kind == KIND_CUSTOM && !f->check) ||
            (f->kind == KIND_TOKEN && !f->chars) || (f->kind == KIND_ID && !f->prefix))
            return f->name;
    }
    return NULL;
}

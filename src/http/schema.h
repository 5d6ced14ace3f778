#ifndef PAYD_HTTP_SCHEMA_H
#define PAYD_HTTP_SCHEMA_H
/* Declared inputs: a route's JSON body and its query parameters as tables of fields. The
 * pipeline decodes them into the route's own struct (req->input) before the idempotency key is
 * claimed, so a refused request costs no write, and handlers never read the JSON by name.
 * `payd dev routes --json` prints the tables as JSON Schema, and tests/docs holds the OpenAPI
 * document to them, so the document cannot drift from what the server accepts. */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "http/refusal.h"

typedef enum {
    KIND_STRING,  /* min..max bytes, no NUL inside → const char * (NULL: absent) */
    KIND_TOKEN,   /* `prefix`, then min..max characters of the class `chars` ("A-Za-z0-9_") */
    KIND_ID,      /* an id of `prefix` → input_id; one that is not such an id names nothing */
    KIND_ENUM,    /* one of `values` → const char * */
    KIND_INTEGER, /* min..max → int64_t (`absent` when not given); JSON: an integer, never 10.0,
                   * "10" or true; query: decimal */
    KIND_BOOLEAN, /* → int: 1 or 0 (`absent` when not given) */
    KIND_METADATA, /* at most max members: names ≤ 40 bytes, string values ≤ 500 → its canonical
                    * JSON text (NULL: absent) */
    KIND_EMAIL,    /* min..max bytes, one '@' with text on each side, no white space */
    KIND_TIME,     /* RFC 3339 → input_time */
    KIND_CUSTOM,   /* `type` ("string": min..max bytes; "array": min..max items), then check() */
} field_kind;

/* KIND_ID: text as sent (NULL: absent); id 0 when it is not an id of the field's prefix. */
typedef struct input_id {
    const char *text;
    uint64_t id;
} input_id;

/* KIND_TIME: text as sent (NULL: absent) and its instant in µs. */
typedef struct input_time {
    const char *text;
    int64_t us;
} input_time;

typedef struct field field;
/* KIND_CUSTOM: decodes value (of the declared type) into out, or sets *detail and refuses.
 * What it keeps goes into a: like every decoded value, it outlives the JSON. */
typedef bool (*field_check)(const field *f, json_t *value, void *out, arena *a,
                            const char **detail);

struct field {
    const char *name;
    field_kind kind;
    bool required;
    size_t at, size;           /* the decoded value's offset and size in the input struct */
    int64_t min, max;          /* bytes, value, members or items, by kind */
    const char *prefix;        /* KIND_ID: "acct"; KIND_TOKEN: the literal start ("tok_") */
    const char *chars;         /* KIND_TOKEN: a character class, regex style */
    const char *const *values; /* KIND_ENUM, and a KIND_CUSTOM array's items (NULL-terminated) */
    int64_t absent;            /* KIND_INTEGER, KIND_BOOLEAN: the value when not given */
    const char *dflt;          /* query: the text taken when not given (the documented default) */
    int err; /* a refused value's code, the application's (numbered from HTTP_REFUSAL_COUNT) or a
              * refusal; 0: HTTP_REFUSAL_INVALID_PARAMETER */
    const char *detail;        /* a refused value's detail; NULL: one said from the rule */
    const char *type, *format; /* KIND_CUSTOM: its JSON type; any kind: a format to document */
    const char *pattern;       /* KIND_CUSTOM string: a pattern to document (check() decides) */
    field_check check;
};

typedef struct schema {
    size_t size; /* of the input struct */
    const field *fields;
    int count;
} schema;

/* Where a field decodes to: IN(struct type, member). */
#define IN(type, member) .at = offsetof(type, member), .size = sizeof(((type *)0)->member)
#define SCHEMA(type, fields)                                                                       \
    {                                                                                              \
        sizeof(type), fields, (int)(sizeof fields / sizeof fields[0])                              \
    }

/* The first problem found: code, the parameter it names, and a detail for people. */
typedef struct input_error {
    int err; /* an http_refusal, or the refused field's own code */
    const char *param;
    char detail[200];
} input_error;

/* A body (a JSON object): a member no field declares → unknown_parameter; then each field in
 * order: absent or null and required → missing_parameter, refused → the field's code (default
 * invalid_parameter). Decoded strings point into body, which must outlive out. */
bool schema_decode_body(const schema *s, json_t *body, void *out, arena *a, input_error *e);
/* The query: lookup(ctx, name) gives a parameter's value or NULL. Names the schema does not
 * declare are the edge's to refuse (http/validate.c). */
bool schema_decode_query(const schema *s, const char *(*lookup)(void *ctx, const char *name),
                         void *ctx, void *out, arena *a, input_error *e);

/* Does text pass field f's rule, as a query value would? (A path segment that must follow the
 * same rule as a body field.) */
bool schema_field_accepts(const field *f, const char *text);

/* Each field as a JSON Schema: a body as an object schema, a query as {name: schema}. */
json_t *schema_body_json(const schema *s);
json_t *schema_query_json(const schema *s);
/* The programming error of a field whose member does not hold its kind: NULL when all agree. */
const char *schema_layout_error(const schema *s);

#endif

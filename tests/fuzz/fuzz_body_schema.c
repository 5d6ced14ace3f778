/* Request bodies through the real route table's declared schemas (api/routes.c, http/schema.c):
 * the first byte picks one of the routes that declare a body, the rest is that route's body,
 * parsed as the pipeline parses it and decoded by the same decoder, into a struct of the
 * route's own size. Links the server's sources, so every schema is the one payd serves.
 *
 * jansson itself is not instrumented, so libFuzzer cannot steer the JSON parse: the dictionary
 * (fuzz_body_schema.dict: every declared field name, JSON tokens, boundary numbers) and the
 * seeds (the API suite's request bodies, prefixed with their route's byte) keep most inputs
 * well-formed JSON, and the decoder's branches are where the search goes.
 *
 * Invariants: a refusal is a 4xx problem with a detail that names a declared field (or the
 * unknown member itself); an accepted body has no member the schema does not declare, and is
 * accepted again when decoded a second time. */
// fuzz-sources: server-sources
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/routes.h"
#include "core/arena.h"
#include "request/problem.h"
#include "http/schema.h"
#include "request/route.h"

static const route *bodies[256];
static int body_count;

static void find_bodies(void)
{
    for (int i = 0; i < payd_route_count && body_count < 256; i++)
        if (payd_routes[i].body)
            bodies[body_count++] = &payd_routes[i];
}

static bool declared(const schema *s, const char *name)
{
    for (int i = 0; i < s->count; i++)
        if (!strcmp(s->fields[i].name, name))
            return true;
    return false;
}

/* A refusal: a 4xx problem with a detail, naming a field the schema declares, or for an unknown
 * member that very member of the body (echoed as sent: the answer is JSON, escaped there). */
static void check_refusal(const schema *s, json_t *body, const input_error *e)
{
    const problem_def *p = problem_lookup(e->err);
    if (e->err == ERR_NONE || p->status < 400 || p->status > 499 || !e->detail[0] || !e->param)
        abort();
    if (e->err == ERR_UNKNOWN_PARAMETER) {
        if (declared(s, e->param) || !json_object_get(body, e->param))
            abort();
    } else if (!declared(s, e->param)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!body_count)
        find_bodies();
    if (size < 1 || !body_count)
        return 0;
    const route *r = bodies[data[0] % body_count];
    /* as the pipeline reads a body: one JSON object, duplicates refused */
    json_t *body = json_loadb((const char *)data + 1, size - 1, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(body)) {
        json_decref(body);
        return 0;
    }
    arena a;
    arena_init(&a);
    void *out = arena_alloc(&a, r->body->size);
    input_error e = {0};
    if (!schema_decode_body(r->body, body, out, &a, &e)) {
        check_refusal(r->body, body, &e);
    } else {
        const char *name;
        json_t *value;
        json_object_foreach(body, name, value)
        {
            if (!declared(r->body, name))
                abort();
        }
        void *again = arena_alloc(&a, r->body->size);
        input_error e2 = {0};
        if (!schema_decode_body(r->body, body, again, &a, &e2))
            abort();
    }
    arena_free(&a);
    json_decref(body);
    return 0;
}

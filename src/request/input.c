#include "request/input.h"

#include "http/schema.h"
#include "request/route.h"

const char *const request_singleton_headers[] = {
    "Authorization", "Idempotency-Key", "If-Match", "If-None-Match",
    "Content-Type",  "Content-Length",  NULL};

static const char *lookup_query(void *ctx, const char *name)
{
    return request_query(ctx, name);
}

bool route_input_or_reply(request *req)
{
    const schema *body = req->route->body, *query = req->route->query;
    if (!body && !query)
        return true;
    /* a route's body and query schemas describe the same struct */
    size_t size = body && query ? (body->size > query->size ? body->size : query->size)
                  : body        ? body->size
                                : query->size;
    req->input = arena_alloc(&req->arena, size);
    input_error e;
    bool ok =
        (!body || schema_decode_body(body, req->json, req->input, &req->arena, &e)) &&
        (!query || schema_decode_query(query, lookup_query, req, req->input, &req->arena, &e));
    if (!ok)
        reply_error_extra(req, e.err, e.detail, json_pack("{s:s}", "param", e.param));
    return ok;
}

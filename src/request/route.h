#ifndef PAYD_REQUEST_ROUTE_H
#define PAYD_REQUEST_ROUTE_H
/* The route table: each route is data (method, path pattern, handler, flags), so auth, rate
 * limits, idempotency and threading are decided in one place and handlers never see them. */
#include "http/schema.h"
#include "request/request.h"
#include "request/step.h"

typedef void (*route_handler)(request *req);

enum route_flags {
    ROUTE_AUTH = 1 << 0,          /* needs a Bearer API key; rate limited per user */
    ROUTE_IDEM_REQUIRED = 1 << 2, /* Idempotency-Key required (§2); the route is written as steps */
    ROUTE_IDEM_OPTIONAL = 1 << 3, /* Idempotency-Key honoured when sent */
    ROUTE_JSON_BODY = 1 << 4,     /* takes a JSON object body */
    /* calls no processor, and its handler's one write goes through commit_response_then: the
     * key is claimed inside that write job, one commit for the claim, the row and the answer */
    ROUTE_CLAIM_IN_WRITE = 1 << 5,
    /* queues write jobs: refused (503) before any work while the node has no id yet or too many
     * jobs wait for the database */
    ROUTE_WRITES = 1 << 6,
};

typedef struct route {
    const char *method;
    const char *pattern; /* "/v1/accounts/{id}": {name} matches one path segment */
    route_handler handler;
    unsigned flags;
    const char *name; /* the pattern, for logs and metrics */
    /* Optional: finishes a request left in doubt by a crash, without a client (idempotent
     * routes only). It must not repeat side effects: it asks the processor what happened. */
    route_handler recover;
    /* The query parameters the route takes; NULL takes none. Any other one is refused before the
     * handler runs, so a misspelt filter never silently returns page 1. */
    const schema *query;
    /* The JSON body's fields (ROUTE_JSON_BODY). Body and query are decoded into req->input
     * before the idempotency key is claimed; both describe the route's one input struct. */
    const schema *body;
    /* Routes written as steps (request/step.h), instead of handler: prepare checks and reads
     * on the HTTP thread before any key is claimed (an answer there claims nothing), and start
     * is the first step after the claim, given what prepare left in req->prepared. Every route
     * that writes or takes a key is written so; a plain handler answers on the HTTP thread. */
    route_handler prepare;
    request_step start;
} route;

typedef enum { ROUTE_MATCHED, ROUTE_NO_PATH, ROUTE_WRONG_METHOD } route_match_result;

/* Finds the route for method + path in routes[0..count) (HEAD finds the GET route); fills params
 * (arena-allocated). On ROUTE_WRONG_METHOD, allow receives the comma-separated methods the path
 * accepts. The table is the caller's: payd's own is api/routes.h's payd_routes. */
route_match_result route_match(const route *routes, int count, const char *method, const char *path,
                               arena *a, const route **out, const char *params[MAX_PATH_PARAMS],
                               char *allow, size_t allow_len);

#endif

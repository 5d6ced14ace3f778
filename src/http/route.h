#ifndef PAYD_HTTP_ROUTE_H
#define PAYD_HTTP_ROUTE_H
/* The route table: each route is data (method, path pattern, handler, flags), so auth, rate
 * limits, idempotency and threading are decided in one place and handlers never see them. */
#include "http/request.h"

typedef void (*route_handler)(request *req);

enum route_flags {
    ROUTE_AUTH = 1 << 0,          /* needs a Bearer API key; rate limited per user */
    ROUTE_BLOCKING = 1 << 1,      /* writes or calls the processor: runs on a worker thread */
    ROUTE_IDEM_REQUIRED = 1 << 2, /* Idempotency-Key required (§2) */
    ROUTE_IDEM_OPTIONAL = 1 << 3, /* Idempotency-Key honoured when sent */
    ROUTE_JSON_BODY = 1 << 4,     /* takes a JSON object body */
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
    /* The query parameters the route takes (NULL-terminated); NULL takes none. Any other one is
     * refused before the handler runs, so a misspelt filter never silently returns page 1. */
    const char *const *query;
} route;

typedef enum { ROUTE_MATCHED, ROUTE_NO_PATH, ROUTE_WRONG_METHOD } route_match_result;

/* Finds the route for method + path (HEAD finds the GET route); fills params (arena-allocated). On
 * ROUTE_WRONG_METHOD, allow receives the comma-separated methods the path accepts. */
route_match_result route_match(const char *method, const char *path, arena *a, const route **out,
                               const char *params[MAX_PATH_PARAMS], char *allow, size_t allow_len);

extern const route payd_routes[];
extern const int payd_route_count;

#endif

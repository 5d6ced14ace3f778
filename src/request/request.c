/* A request's life: what is freed with it. */
#include <stdlib.h>

#include "request/claim.h"
#include "request/request.h"

void request_free(request *req)
{
    free(req->resp_body);
    free(req->resp_kept_body);
    json_decref(req->json);
    if (req->idem)
        free(req->idem->canonical_body);
    arena_free(&req->arena);
    free(req);
}

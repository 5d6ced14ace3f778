#ifndef PAYD_REQUEST_INPUT_H
#define PAYD_REQUEST_INPUT_H
/* A request's declared input: the matched route's body and query schemas (http/schema.h). */
#include <stdbool.h>

#include "request/request.h"

/* The headers payd reads one value of, so a request may carry each at most once: two copies
 * would let two parts of the server (the key claim and the handler, say) read two values.
 * NULL-terminated, for edge_check_headers. */
extern const char *const request_singleton_headers[];

/* The pipeline's step: decodes the matched route's body and query into req->input (arena
 * memory), or answers 400 with `code` and `param` and returns false. */
bool route_input_or_reply(request *req);

#endif

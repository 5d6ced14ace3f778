#ifndef PAYD_SERVER_PIPELINE_H
#define PAYD_SERVER_PIPELINE_H
/* The request pipeline (route → auth → rate limit → body checks → idempotency → handler) over
 * the HTTP server (http/server.h), and the access log. */
#include "node/app.h"
#include "request/request.h"
#include "request/route.h"

/* Starts serving on --listen (written back with the port it got). */
int pipeline_start(app *a, char *err, size_t errlen);
/* Graceful: stop accepting, let requests in flight finish (up to --shutdown-timeout), stop. */
void pipeline_stop(app *a);
/* The pipeline's handler step: runs step (the route's handler, or for the recoverer its
 * recover step), answers 503 with Retry-After when its database work failed whatever the step
 * concluded (see db_thread_failure), then lets the idempotency engine settle the key. The
 * caller resets the thread's failure flag before the request's first database work. */
void run_step(request *req, route_handler step);

#endif

#ifndef PAYD_SERVER_PIPELINE_H
#define PAYD_SERVER_PIPELINE_H
/* The HTTP front: libmicrohttpd with an epoll thread pool, the request pipeline
 * (route → auth → rate limit → body checks → idempotency → handler) and the access log. */
#include "http/request.h"
#include "http/route.h"
#include "server/app.h"

int http_server_start(app *a, char *err, size_t errlen);
/* Graceful: stop accepting, let requests in flight finish (up to --shutdown-timeout), stop. */
void http_server_stop(app *a);
/* The pipeline's handler step: runs step (the route's handler, or for the recoverer its
 * recover step), answers 503 with Retry-After when its database work failed whatever the step
 * concluded (see db_thread_failure), then lets the idempotency engine settle the key. The
 * caller resets the thread's failure flag before the request's first database work. */
void run_step(request *req, route_handler step);
void request_free(request *req);

#endif

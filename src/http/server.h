#ifndef PAYD_HTTP_SERVER_H
#define PAYD_HTTP_SERVER_H
/* The HTTP front: libmicrohttpd with an epoll thread pool, the request pipeline
 * (route → auth → rate limit → body checks → idempotency → handler) and the access log. */
#include "http/request.h"
#include "server/app.h"

int http_server_start(app *a, char *err, size_t errlen);
/* Graceful: stop accepting, let requests in flight finish (up to --shutdown-timeout), stop. */
void http_server_stop(app *a);
/* The pipeline's handler step, shared with the recoverer: runs the handler, then lets the
 * idempotency engine settle the key. */
void run_handler(request *req);
void request_free(request *req);

#endif

/* Operations (§12): health, readiness, metrics, the OpenAPI document. No auth, no rate limit. */
#include <stdlib.h>
#include <string.h>

#include "api/handlers.h"
#include "node/app.h"
#include "node/metrics.h"
#include "store/store.h"
#include "webhook/delivery.h"

extern const char payd_openapi_json[];

void ops_healthz(request *req)
{
    static const char ok[] = "{\"status\":\"ok\"}"; /* a constant: load balancers ask often */
    reply_raw(req, 200, ok, sizeof ok - 1);
}

/* Ready only when this node can get a connection right now, the database answers on it and
 * its writes succeed: a node that is down, whose connection budget is used up, or whose disk
 * is full takes no traffic. */
void ops_readyz(request *req)
{
    const char *why = NULL;
    bool ok = app_ready(req->app, &why);
    if (ok && !atomic_load(&req->app->shutting_down)) {
        reply_json(req, 200, json_pack("{s:s}", "status", "ready"));
    } else {
        reply_header(req, "Retry-After", "1");
        reply_error(req, ok ? ERR_SHUTTING_DOWN : ERR_NOT_READY, ok ? "shutting down" : why);
    }
}

void ops_metrics(request *req)
{
    /* the node's counters, then the events' and webhooks' own (§15, webhook/delivery.c) */
    char *node = metrics_render(req->app->metrics, req->app);
    char *webhooks = webhook_metrics_render(req->app);
    size_t node_len = strlen(node), webhooks_len = strlen(webhooks);
    char *text = malloc(node_len + webhooks_len + 1);
    memcpy(text, node, node_len);
    memcpy(text + node_len, webhooks, webhooks_len + 1);
    free(node);
    free(webhooks);
    reply_raw(req, 200, text, node_len + webhooks_len);
    free(text);
    reply_header(req, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
}

void ops_openapi(request *req)
{
    reply_raw(req, 200, payd_openapi_json, strlen(payd_openapi_json));
}

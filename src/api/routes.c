/* The route table: every endpoint of the contract, as data. Flags decide auth, threading,
 * idempotency and body parsing in one place (server/pipeline.c); handlers never repeat them. */
#include "api/dashboard.h"
#include "api/handlers.h"
#include "api/stats.h"
#include "http/route.h"

#define AUTH    ROUTE_AUTH
#define WRITE   (ROUTE_AUTH | ROUTE_BLOCKING | ROUTE_JSON_BODY)
#define IDEM    ROUTE_IDEM_REQUIRED
#define IDEM_OK ROUTE_IDEM_OPTIONAL

#define R(method, pattern, handler, flags)                                                         \
    {                                                                                              \
        method, pattern, handler, flags, pattern, NULL, NULL                                       \
    }
#define R_RECOVER(method, pattern, handler, flags, recover)                                        \
    {                                                                                              \
        method, pattern, handler, flags, pattern, recover, NULL                                    \
    }

/* A route that reads query parameters declares them. */
#define R_QUERY(method, pattern, handler, flags, query)                                            \
    {                                                                                              \
        method, pattern, handler, flags, pattern, NULL, query                                      \
    }

#define PAGE "limit", "cursor"
static const char *const page_query[] = {PAGE, NULL};
static const char *const payments_list_query[] = {PAGE, "status", "created_gte", "created_lt",
                                                  NULL};
static const char *const payments_count_query[] = {"status", "created_gte", "created_lt", NULL};
static const char *const orders_list_query[] = {PAGE, "status", NULL};
static const char *const payments_stats_query[] = {"interval", "created_gte", "created_lt", NULL};
static const char *const api_keys_list_query[] = {PAGE, "status", NULL};
static const char *const events_list_query[] = {PAGE, "type", "created_gte", "created_lt", NULL};

const route payd_routes[] = {
    R("GET", "/healthz", ops_healthz, 0),
    R("GET", "/readyz", ops_readyz, 0),
    R("GET", "/metrics", ops_metrics, 0),
    R("GET", "/openapi.json", ops_openapi, 0),
    R("GET", "/", dashboard_index, 0),
    R("GET", "/assets/{file}", dashboard_asset, 0),

    R("POST", "/v1/accounts", accounts_create, WRITE | IDEM_OK),
    R_QUERY("GET", "/v1/accounts", accounts_list, AUTH, page_query),
    R("GET", "/v1/accounts/{id}", accounts_get, AUTH),
    R_QUERY("GET", "/v1/accounts/{id}/payments", payments_list, AUTH, payments_list_query),
    R_QUERY("GET", "/v1/accounts/{id}/payments/count", payments_count, AUTH, payments_count_query),
    R_QUERY("GET", "/v1/accounts/{id}/payments/stats", payments_stats, AUTH, payments_stats_query),

    R_RECOVER("POST", "/v1/payments", payments_create, WRITE | IDEM, payments_recover),
    R("GET", "/v1/payments/{id}", payments_get, AUTH),
    R_RECOVER("POST", "/v1/payments/{id}/refunds", refunds_create, WRITE | IDEM, refunds_recover),
    R_QUERY("GET", "/v1/payments/{id}/refunds", refunds_list, AUTH, page_query),

    R("POST", "/v1/orders", orders_create, WRITE | IDEM_OK),
    R_QUERY("GET", "/v1/orders", orders_list, AUTH, orders_list_query),
    R("GET", "/v1/orders/{id}", orders_get, AUTH),
    R("PUT", "/v1/orders/{id}/status", orders_set_status, WRITE),

    R("POST", "/v1/transfers", transfers_create, WRITE),
    R("GET", "/v1/transfers/{id}", transfers_get, AUTH),
    R("GET", "/v1/transfers/by-biz-seq/{biz_seq}", transfers_get_by_biz_seq, AUTH),
    R_QUERY("GET", "/v1/accounts/{id}/transfers", transfers_list, AUTH, page_query),

    R("GET", "/v1/users/me", users_me, AUTH),
    R("PATCH", "/v1/users/me", users_update, WRITE),

    R_QUERY("GET", "/v1/api_keys", api_keys_list, AUTH, api_keys_list_query),
    R("POST", "/v1/api_keys", api_keys_create, WRITE),
    R("DELETE", "/v1/api_keys/{id}", api_keys_revoke, AUTH | ROUTE_BLOCKING),

    R("POST", "/v1/products", products_create, WRITE | IDEM_OK),
    R("GET", "/v1/products/{sku}", products_get, AUTH),
    R("PATCH", "/v1/products/{sku}", products_update, WRITE),
    R("POST", "/v1/products/{sku}/reservations", reservations_create, WRITE | IDEM),

    /* events and webhooks (§15) */
    R_QUERY("GET", "/v1/events", events_list, AUTH, events_list_query),
    R("GET", "/v1/events/{id}", events_get, AUTH),
    R("POST", "/v1/webhook_endpoints", webhooks_create, WRITE | IDEM_OK),
    R_QUERY("GET", "/v1/webhook_endpoints", webhooks_list, AUTH, page_query),
    R("GET", "/v1/webhook_endpoints/{id}", webhooks_get, AUTH),
    R("PATCH", "/v1/webhook_endpoints/{id}", webhooks_update, WRITE),
    R("DELETE", "/v1/webhook_endpoints/{id}", webhooks_delete, AUTH | ROUTE_BLOCKING),
    R_QUERY("GET", "/v1/webhook_endpoints/{id}/deliveries", webhooks_deliveries, AUTH, page_query),
};

const int payd_route_count = sizeof payd_routes / sizeof payd_routes[0];

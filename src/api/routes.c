/* The route table: every endpoint of the contract, as data. Flags decide auth, threading,
 * idempotency and body parsing in one place (server/pipeline.c); the declared body and query
 * (http/schema.h) are validated there too, before any key is claimed. Handlers never repeat
 * any of it. */
#include "api/routes.h"

#include "api/dashboard.h"
#include "api/enums.h"
#include "api/event_waiters.h"
#include "api/events.h"
#include "api/handlers.h"
#include "api/pagination.h"
#include "api/stats.h"

#define AUTH           ROUTE_AUTH
#define WRITE          (ROUTE_AUTH | ROUTE_WRITES | ROUTE_JSON_BODY)
#define IDEM           ROUTE_IDEM_REQUIRED
#define IDEM_OK        ROUTE_IDEM_OPTIONAL
#define CLAIM_IN_WRITE ROUTE_CLAIM_IN_WRITE

#define R(method_, pattern_, handler_, flags_)                                                     \
    {                                                                                              \
        .method = method_, .pattern = pattern_, .handler = handler_, .flags = flags_,              \
        .name = pattern_                                                                           \
    }
/* A route that reads query parameters declares them. */
#define R_QUERY(method_, pattern_, handler_, flags_, query_)                                       \
    {                                                                                              \
        .method = method_, .pattern = pattern_, .handler = handler_, .flags = flags_,              \
        .name = pattern_, .query = &query_                                                         \
    }
/* A route written as steps (request/step.h): prepare before the claim, start after it. */
#define R_STEPS(method_, pattern_, prepare_, start_, flags_, body_, recover_)                      \
    {                                                                                              \
        .method = method_, .pattern = pattern_, .flags = flags_, .name = pattern_, .body = &body_, \
        .recover = recover_, .prepare = prepare_, .start = start_                                  \
    }

/* A route written as steps that takes a query and no body. */
#define R_QUERY_STEPS(method_, pattern_, prepare_, start_, flags_, query_)                         \
    {                                                                                              \
        .method = method_, .pattern = pattern_, .flags = flags_, .name = pattern_,                 \
        .query = &query_, .prepare = prepare_, .start = start_                                     \
    }

/* The same for a route that takes no body and has no prepare step. */
#define R_START(method_, pattern_, start_, flags_)                                                 \
    {                                                                                              \
        .method = method_, .pattern = pattern_, .flags = flags_, .name = pattern_, .start = start_ \
    }

static const field page_fields[] = {LIST_LIMIT, LIST_CURSOR};
static const schema page_query = SCHEMA(list_params, page_fields);
static const field payments_list_fields[] = {LIST_LIMIT, LIST_CURSOR,
                                             LIST_FILTER("status", payment_statuses),
                                             LIST_CREATED_GTE, LIST_CREATED_LT};
static const schema payments_list_query = SCHEMA(list_params, payments_list_fields);
static const field payments_count_fields[] = {LIST_FILTER("status", payment_statuses),
                                              LIST_CREATED_GTE, LIST_CREATED_LT};
static const schema payments_count_query = SCHEMA(list_params, payments_count_fields);
static const field payments_stats_fields[] = {
    {.name = "interval",
     .kind = KIND_ENUM,
     IN(list_params, interval),
     .values = stats_intervals,
     .dflt = "day"},
    LIST_CREATED_GTE,
    LIST_CREATED_LT,
};
static const schema payments_stats_query = SCHEMA(list_params, payments_stats_fields);
static const field orders_list_fields[] = {LIST_LIMIT, LIST_CURSOR,
                                           LIST_FILTER("status", order_statuses)};
static const schema orders_list_query = SCHEMA(list_params, orders_list_fields);
static const field api_keys_list_fields[] = {LIST_LIMIT, LIST_CURSOR,
                                             LIST_FILTER("status", api_key_statuses)};
static const schema api_keys_list_query = SCHEMA(list_params, api_keys_list_fields);
static const field txns_list_fields[] = {
    LIST_LIMIT,
    LIST_CURSOR,
    {.name = "account_id", .kind = KIND_ID, IN(list_params, account), .prefix = "acct"},
    LIST_FILTER("type", balance_transaction_types),
    {.name = "source", .kind = KIND_STRING, IN(list_params, source), .min = 1, .max = 32},
    LIST_CREATED_GTE,
    LIST_CREATED_LT,
};
static const schema txns_list_query = SCHEMA(list_params, txns_list_fields);
static const field events_list_fields[] = {
    LIST_LIMIT,
    LIST_CURSOR,
    {.name = "type",
     .kind = KIND_CUSTOM,
     IN(list_params, status),
     .type = "string",
     .min = 1,
     .max = 400,
     .check = event_type_list_check},
    LIST_CREATED_GTE,
    LIST_CREATED_LT,
    {.name = "wait",
     .kind = KIND_INTEGER,
     IN(list_params, wait),
     .min = 0,
     .max = EVENT_WAIT_MAX_S,
     .dflt = "0"},
};
static const schema events_list_query = SCHEMA(list_params, events_list_fields);

const route payd_routes[] = {
    R("GET", "/healthz", ops_healthz, 0),
    R("GET", "/readyz", ops_readyz, 0),
    R("GET", "/metrics", ops_metrics, 0),
    R("GET", "/openapi.json", ops_openapi, 0),
    R("GET", "/", dashboard_index, 0),
    R("GET", "/assets/{file}", dashboard_asset, 0),

    R_STEPS("POST", "/v1/accounts", NULL, accounts_create, WRITE | IDEM_OK | CLAIM_IN_WRITE,
            accounts_create_body, NULL),
    R_QUERY("GET", "/v1/accounts", accounts_list, AUTH, page_query),
    R("GET", "/v1/accounts/{id}", accounts_get, AUTH),
    R_QUERY("GET", "/v1/accounts/{id}/payments", payments_list, AUTH, payments_list_query),
    R_QUERY("GET", "/v1/accounts/{id}/payments/count", payments_count, AUTH, payments_count_query),
    R_QUERY("GET", "/v1/accounts/{id}/payments/stats", payments_stats, AUTH, payments_stats_query),
    R("GET", "/v1/accounts/{id}/balance", accounts_balance, AUTH),
    R_QUERY("GET", "/v1/balance_transactions", balance_transactions_list, AUTH, txns_list_query),
    R("GET", "/v1/balance_transactions/{id}", balance_transactions_get, AUTH),

    R_STEPS("POST", "/v1/payments", payments_prepare, payments_create, WRITE | IDEM,
            payments_create_body, payments_recover),
    R("GET", "/v1/payments/{id}", payments_get, AUTH),
    R_STEPS("POST", "/v1/payments/{id}/refunds", refunds_prepare, refunds_create, WRITE | IDEM,
            refunds_create_body, refunds_recover),
    R_QUERY("GET", "/v1/payments/{id}/refunds", refunds_list, AUTH, page_query),
    R_STEPS("POST", "/v1/payments/{id}/capture", captures_prepare, captures_create, WRITE | IDEM,
            captures_create_body, captures_recover),
    R_STEPS("POST", "/v1/payments/{id}/cancel", cancels_prepare, cancels_create, WRITE | IDEM,
            cancels_create_body, cancels_recover),

    R_STEPS("POST", "/v1/orders", NULL, orders_create, WRITE | IDEM_OK | CLAIM_IN_WRITE,
            orders_create_body, NULL),
    R_QUERY("GET", "/v1/orders", orders_list, AUTH, orders_list_query),
    R("GET", "/v1/orders/{id}", orders_get, AUTH),
    R_STEPS("PUT", "/v1/orders/{id}/status", NULL, orders_set_status, WRITE, orders_status_body,
            NULL),

    R_STEPS("POST", "/v1/transfers", transfers_prepare, transfers_create, WRITE,
            transfers_create_body, NULL),
    R("GET", "/v1/transfers/{id}", transfers_get, AUTH),
    R("GET", "/v1/transfers/by-biz-seq/{biz_seq}", transfers_get_by_biz_seq, AUTH),
    R_QUERY("GET", "/v1/accounts/{id}/transfers", transfers_list, AUTH, page_query),

    R("GET", "/v1/users/me", users_me, AUTH),
    R_STEPS("PATCH", "/v1/users/me", NULL, users_update, WRITE, users_update_body, NULL),

    R_QUERY("GET", "/v1/api_keys", api_keys_list, AUTH, api_keys_list_query),
    R_STEPS("POST", "/v1/api_keys", NULL, api_keys_create, WRITE | IDEM_OK | CLAIM_IN_WRITE,
            api_keys_create_body, NULL),
    R_START("DELETE", "/v1/api_keys/{id}", api_keys_revoke, AUTH | ROUTE_WRITES),

    R_STEPS("POST", "/v1/products", NULL, products_create, WRITE | IDEM_OK | CLAIM_IN_WRITE,
            products_create_body, NULL),
    R("GET", "/v1/products/{sku}", products_get, AUTH),
    R_STEPS("PATCH", "/v1/products/{sku}", NULL, products_update, WRITE, products_update_body,
            NULL),
    R_STEPS("POST", "/v1/products/{sku}/reservations", reservations_prepare, reservations_create,
            WRITE | IDEM | CLAIM_IN_WRITE, reservations_create_body, NULL),

    /* events and webhooks (§15) */
    R_QUERY_STEPS("GET", "/v1/events", events_list_prepare, events_list, AUTH, events_list_query),
    R("GET", "/v1/events/{id}", events_get, AUTH),
    R_STEPS("POST", "/v1/events/{id}/redeliver", NULL, events_redeliver,
            WRITE | IDEM_OK | CLAIM_IN_WRITE, events_redeliver_body, NULL),
    R_STEPS("POST", "/v1/webhook_endpoints", NULL, webhooks_create,
            WRITE | IDEM_OK | CLAIM_IN_WRITE, webhooks_create_body, NULL),
    R_QUERY("GET", "/v1/webhook_endpoints", webhooks_list, AUTH, page_query),
    R("GET", "/v1/webhook_endpoints/{id}", webhooks_get, AUTH),
    R_STEPS("PATCH", "/v1/webhook_endpoints/{id}", NULL, webhooks_update, WRITE,
            webhooks_update_body, NULL),
    R_START("DELETE", "/v1/webhook_endpoints/{id}", webhooks_delete, AUTH | ROUTE_WRITES),
    R_QUERY("GET", "/v1/webhook_endpoints/{id}/deliveries", webhooks_deliveries, AUTH, page_query),
    R_STEPS("POST", "/v1/webhook_endpoints/{id}/rotate_secret", NULL, webhooks_rotate_secret,
            WRITE | IDEM_OK | CLAIM_IN_WRITE, webhooks_rotate_secret_body, NULL),
    R_STEPS("POST", "/v1/webhook_endpoints/{id}/recover", NULL, webhooks_recover,
            WRITE | IDEM_OK | CLAIM_IN_WRITE, webhooks_recover_body, NULL),
};

const int payd_route_count = sizeof payd_routes / sizeof payd_routes[0];

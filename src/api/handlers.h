#ifndef PAYD_API_HANDLERS_H
#define PAYD_API_HANDLERS_H
/* Every route handler; the route table (routes.c) says which path and flags each serves. */
#include "http/request.h"
#include "store/db.h"

void ops_healthz(request *req);
void ops_readyz(request *req);
void ops_metrics(request *req);
void ops_openapi(request *req);

void accounts_create(request *req);
void accounts_get(request *req);
void accounts_list(request *req);
json_t *account_json(db_stmt *st);
bool account_owned(db_conn *db, uint64_t user, uint64_t account, char currency[4]);
/* In a write job: adds amount to the balance (and one to the version) when the batch commits. */
db_status account_credit_at_commit(db_conn *db, uint64_t account, int64_t amount, int64_t at);

void payments_create(request *req);
void payments_recover(request *req);
void payments_get(request *req);
void payments_list(request *req);
void payments_count(request *req);

void refunds_create(request *req);
void refunds_recover(request *req);
void refunds_list(request *req);
json_t *refund_json(db_stmt *st);

void orders_create(request *req);
void orders_get(request *req);
void orders_list(request *req);
void orders_set_status(request *req);
json_t *order_json(db_stmt *st);

void transfers_create(request *req);
void transfers_get(request *req);
void transfers_get_by_biz_seq(request *req);
void transfers_list(request *req);
json_t *transfer_json(db_stmt *st);

void users_me(request *req);
void users_update(request *req);

void api_keys_list(request *req);
void api_keys_create(request *req);
void api_keys_revoke(request *req);
/* events and webhooks (§15): events.c, webhooks.c */
void events_list(request *req);
void events_get(request *req);
void webhooks_create(request *req);
void webhooks_list(request *req);
void webhooks_get(request *req);
void webhooks_update(request *req);
void webhooks_delete(request *req);
void webhooks_deliveries(request *req);
/* The order as this connection sees it now (NULL when there is none). */
json_t *order_read_json(db_conn *db, uint64_t id);

void products_create(request *req);
void products_get(request *req);
void products_update(request *req);
void reservations_create(request *req);

/* the dashboard (dashboard.c) and payment statistics (stats.c) */
void dashboard_index(request *req);
void dashboard_asset(request *req);
void payments_stats(request *req);

#endif

#ifndef PAYD_API_HANDLERS_H
#define PAYD_API_HANDLERS_H
/* Every route handler; the route table (routes.c) says which path and flags each serves. */
#include "api/resource.h"
#include "http/schema.h"
#include "request/request.h"
#include "request/step.h"
#include "store/db.h"

/* The declared JSON bodies (http/schema.h), each next to its handler. */
extern const schema accounts_create_body;
extern const schema payments_create_body;
extern const schema refunds_create_body;
extern const schema transfers_create_body;
extern const schema api_keys_create_body;
extern const schema webhooks_create_body;
extern const schema webhooks_update_body;
extern const schema webhooks_rotate_secret_body;
extern const schema events_redeliver_body;
extern const schema webhooks_recover_body;
extern const schema orders_create_body;
extern const schema orders_status_body;
extern const schema users_update_body;
extern const schema products_create_body;
extern const schema products_update_body;
extern const schema reservations_create_body;

void ops_healthz(request *req);
void ops_readyz(request *req);
void ops_metrics(request *req);
void ops_openapi(request *req);

step_result accounts_create(request *req, void *prepared);
void accounts_get(request *req);
void accounts_list(request *req);
extern const resource account_resource;
/* INSERT … RETURNING the account's columns (the API's create and `payd account create`). */
db_stmt *account_insert(db_conn *db, uint64_t id, uint64_t user, const char *currency,
                        const char *name, int64_t now);
bool account_owned(db_conn *db, uint64_t user, uint64_t account, char currency[4]);
/* In a write job: adds amount to the balance (and one to the version) when the batch commits. */
db_status account_credit_at_commit(db_conn *db, uint64_t account, int64_t amount, int64_t at);
/* In a write job, before a credit: whether the balance can take amount more (sum_fits). */
db_status account_credit_fits(db_conn *db, uint64_t account, int64_t amount, bool *fits);

/* the ledger (api/ledger.c, docs/ledger.md) */
void accounts_balance(request *req);
void balance_transactions_list(request *req);
void balance_transactions_get(request *req);

void payments_prepare(request *req);
step_result payments_create(request *req, void *prepared);
void payments_recover(request *req);
void payments_get(request *req);
void payments_list(request *req);
void payments_count(request *req);
/* A payments row read with the payment resource's columns, as the contract shows it. */
void payment_write_row(db_stmt *st, jsonw *w);
extern const resource payment_resource;

/* §17: POST /v1/payments/{id}/capture and /cancel (api/captures.c), and the recoverer's
 * expiry of holds past capture_before */
extern const schema captures_create_body;
extern const schema cancels_create_body;
void captures_prepare(request *req);
step_result captures_create(request *req, void *prepared);
void captures_recover(request *req);
void cancels_prepare(request *req);
step_result cancels_create(request *req, void *prepared);
void cancels_recover(request *req);

void refunds_prepare(request *req);
step_result refunds_create(request *req, void *prepared);
void refunds_recover(request *req);
void refunds_list(request *req);

step_result orders_create(request *req, void *prepared);
void orders_get(request *req);
void orders_list(request *req);
step_result orders_set_status(request *req, void *prepared);

void transfers_prepare(request *req);
step_result transfers_create(request *req, void *prepared);
void transfers_get(request *req);
void transfers_get_by_biz_seq(request *req);
void transfers_list(request *req);

void users_me(request *req);
step_result users_update(request *req, void *prepared);

void api_keys_list(request *req);
step_result api_keys_create(request *req, void *prepared);
step_result api_keys_revoke(request *req, void *prepared);
/* events and webhooks (§15): events.c, webhooks.c */
void events_list_prepare(request *req);
step_result events_list(request *req, void *ctx);
void events_get(request *req);
step_result webhooks_create(request *req, void *prepared);
void webhooks_list(request *req);
void webhooks_get(request *req);
step_result webhooks_update(request *req, void *prepared);
step_result webhooks_delete(request *req, void *prepared);
void webhooks_deliveries(request *req);
/* a new secret, the previous one signing beside it for a while (webhook_rotation.c) */
step_result webhooks_rotate_secret(request *req, void *prepared);
/* sending again (redelivery.c) */
step_result events_redeliver(request *req, void *prepared);
step_result webhooks_recover(request *req, void *prepared);
/* At start, once the server secret is loaded: seals every webhook endpoint secret still in the
 * clear and redacts the secret in every stored answer of an endpoint's create (rows written
 * before secrets were sealed). In a transaction of its own; 0, or -1. */
int webhook_secrets_seal_existing(db_conn *db, const uint8_t server_secret[32]);
/* The order as this connection sees it now, as JSON text to free (NULL when there is none). */
char *order_read_text(db_conn *db, uint64_t id);

step_result products_create(request *req, void *prepared);
void products_get(request *req);
step_result products_update(request *req, void *prepared);
void reservations_prepare(request *req);
step_result reservations_create(request *req, void *prepared);

/* the dashboard (dashboard.c) and payment statistics (stats.c) */
void dashboard_index(request *req);
void dashboard_asset(request *req);
void payments_stats(request *req);

#endif

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

void payments_create(request *req);
void payments_recover(request *req);
void payments_get(request *req);
void payments_list(request *req);
void payments_count(request *req);

#endif

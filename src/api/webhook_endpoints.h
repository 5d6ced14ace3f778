#ifndef PAYD_API_WEBHOOK_ENDPOINTS_H
#define PAYD_API_WEBHOOK_ENDPOINTS_H
/* What the webhook endpoint routes share: webhooks.c (create, read, update, delete) and
 * webhook_rotation.c (the secret's rotation). */
#include "api/resource.h"
#include "core/jsonw.h"
#include "store/db.h"

/* The columns endpoint_resource's writer reads, in its order. */
#define ENDPOINT_COLUMNS                                                                           \
    "id, url, events, description, disabled, created_at, updated_at, previous_secret_expires_at"

/* The webhook endpoint as a resource (webhooks.c). */
extern const resource endpoint_resource;

/* "previous_secret_expires_at": the time column `column` of st holds, or null (no previous
 * secret was kept). */
void write_previous_secret_expiry(db_stmt *st, int column, jsonw *w);

#endif

#ifndef PAYD_API_WEBHOOK_ENDPOINTS_H
#define PAYD_API_WEBHOOK_ENDPOINTS_H
/* What the webhook endpoint routes share: webhooks.c (create, read, update, delete) and
 * webhook_rotation.c (the secret's rotation). */
#include "api/resource.h"
#include "webhook/outbox.h"

/* The columns endpoint_resource's writer (webhook_endpoint_write) reads, in its order. */
#define ENDPOINT_COLUMNS WEBHOOK_ENDPOINT_COLUMNS

/* The webhook endpoint as a resource (webhooks.c). */
extern const resource endpoint_resource;

#endif

#include "api/enums.h"

#include <stddef.h>

const char *const payment_statuses[] = {"succeeded", "failed", "partially_refunded", "refunded",
                                        NULL};
const char *const order_statuses[] = {"created",   "paid",     "cancelled", "shipped",
                                      "completed", "refunded", NULL};
const char *const api_key_statuses[] = {"active", "revoked", NULL};
const char *const refund_reasons[] = {"requested_by_customer", "duplicate", "fraudulent", NULL};
const char *const stats_intervals[] = {"hour", "day", NULL};

#define EVENT_TYPES                                                                                \
    "account.created", "payment.succeeded", "payment.failed", "refund.succeeded", "order.created", \
        "order.status_changed", "transfer.succeeded", "transfer.failed", "reservation.created",    \
        "webhook_endpoint.disabled"
const char *const event_types[] = {EVENT_TYPES, NULL};
const char *const webhook_event_choices[] = {"*", EVENT_TYPES, NULL};

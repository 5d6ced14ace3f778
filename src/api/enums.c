#include "api/enums.h"

#include <stddef.h>
#include <string.h>

#include "api/pagination.h"
#include "core/arena.h"

const char *const payment_statuses[] = {"requires_capture",   "succeeded", "failed", "canceled",
                                        "partially_refunded", "refunded",  NULL};
const char *const capture_methods[] = {"automatic", "manual", NULL};
const char *const cancellation_reasons[] = {"requested_by_customer", "abandoned", "fraudulent",
                                            "duplicate", NULL};
const char *const order_statuses[] = {"created",   "paid",     "cancelled", "shipped",
                                      "completed", "refunded", NULL};
const char *const api_key_statuses[] = {"active", "revoked", NULL};
const char *const refund_reasons[] = {"requested_by_customer", "duplicate", "fraudulent", NULL};
const char *const stats_intervals[] = {"hour", "day", NULL};
const char *const balance_transaction_types[] = {"charge", "authorization", "capture", "release",
                                                 "refund", "transfer",      NULL};

#define EVENT_TYPES                                                                                \
    "account.created", "payment.succeeded", "payment.failed", "payment.authorized",                \
        "payment.captured", "payment.canceled", "refund.succeeded", "order.created",               \
        "order.status_changed", "transfer.succeeded", "transfer.failed", "reservation.created",    \
        "webhook_endpoint.disabled"
const char *const event_types[] = {EVENT_TYPES, NULL};
const char *const webhook_event_choices[] = {"*", EVENT_TYPES, NULL};

bool event_type_list_check(const field *f, json_t *value, void *out, arena *a, const char **detail)
{
    (void)f;
    const char *text = json_string_value(value);
    int count = 0;
    for (const char *t = text; t; count++) {
        const char *comma = strchr(t, ',');
        size_t n = comma ? (size_t)(comma - t) : strlen(t);
        bool known = false;
        for (int i = 0; event_types[i] && !known; i++)
            known = strlen(event_types[i]) == n && !memcmp(event_types[i], t, n);
        if (!known || count == LIST_MAX_FILTER_VALUES) {
            *detail = known ? "'type' takes at most 16 event types"
                            : "'type' takes event types separated by commas";
            return false;
        }
        t = comma ? comma + 1 : NULL;
    }
    *(const char **)out = arena_strdup(a, text);
    return true;
}

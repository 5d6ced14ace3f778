#ifndef PAYD_API_ENUMS_H
#define PAYD_API_ENUMS_H
/* The values of every enumerated body field and query filter, one list each (NULL-terminated):
 * the route table declares them (http/schema.h), handlers compare against them. */
#include <stdbool.h>

#include "http/schema.h"

extern const char *const payment_statuses[];
extern const char *const order_statuses[];
extern const char *const api_key_statuses[];
extern const char *const refund_reasons[];
/* §17: a payment's capture_method, and a cancel's cancellation_reason ("expired" is the
 * recoverer's own, never a client's) */
extern const char *const capture_methods[];
extern const char *const cancellation_reasons[];
extern const char *const stats_intervals[];
/* The types of a ledger entry, and so of its balance transactions (docs/ledger.md). */
extern const char *const balance_transaction_types[];
/* The event types of §15; webhook_event_choices adds "*" (every type) in front. */
extern const char *const event_types[];
extern const char *const webhook_event_choices[];
/* The check of GET /v1/events' `type` filter: one event type, or up to LIST_MAX_FILTER_VALUES
 * separated by commas (http/schema.h's field check). */
bool event_type_list_check(const field *f, json_t *value, void *out, arena *a, const char **detail);

#endif

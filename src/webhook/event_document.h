#ifndef PAYD_WEBHOOK_EVENT_DOCUMENT_H
#define PAYD_WEBHOOK_EVENT_DOCUMENT_H
/* The JSON an event is shown as (docs/api.md §15). */
#include <stdint.h>

#include "core/jsonw.h"

/* The event document {"id", "object": "event", "type", "created_at", "data": {"object"}}: the
 * body of GET /v1/events/{id} and of every delivery. */
void event_document_write(jsonw *w, uint64_t id, const char *type, const char *data,
                          int64_t created_at);

#endif

#ifndef PAYD_CORE_LIVEMODE_H
#define PAYD_CORE_LIVEMODE_H
/* "livemode" on every object payd answers with (docs/modes.md): one pass over a JSON text that
 * writes `"livemode": live` right after the "object" member of every object naming its kind
 * ("object": "payment", "event", ...), except a list's envelope and anything inside a
 * "metadata" object (the client's own keys), and an object that says its own ("object": "api_key",
 * "livemode": false: a test key a live key made). Every object one answer or one webhook delivery
 * holds is of one mode, so the serializers need not know modes at all: the pipeline marks a
 * request's answer with its key's mode, the webhook worker a delivery with its event owner's. */
#include <stdbool.h>
#include <stddef.h>

/* The marked text (malloc'd, NUL-terminated, its length in *out_len), or NULL when json holds
 * nothing to mark or is not a JSON object or array. */
char *json_mark_livemode(const char *json, size_t len, bool live, size_t *out_len);

#endif

/* The event document (event_document.h). */
#include "webhook/event_document.h"

#include "core/ids.h"
#include "core/timefmt.h"

void event_document_write(jsonw *w, uint64_t id, const char *type, const char *data,
                          int64_t created_at)
{
    char text[ID_STR_MAX], when[RFC3339_STR_MAX];
    jw_object_begin(w);
    jw_key(w, "id");
    id_format(id, "evt", text);
    jw_string(w, text);
    jw_key(w, "object");
    jw_string(w, "event");
    jw_key(w, "type");
    jw_string(w, type);
    jw_key(w, "created_at");
    format_rfc3339_ms(created_at, when);
    jw_string(w, when);
    jw_key(w, "data");
    jw_object_begin(w);
    jw_key(w, "object");
    jw_raw(w, data, "null");
    jw_object_end(w);
    jw_object_end(w);
}

/* Request bodies: whatever parses canonicalizes, and the canonical form is a fixed point (the
 * fingerprint of a replayed request does not depend on how its JSON was written). */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/canonical.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *v = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!v)
        return 0;
    char *once = json_canonical(v);
    if (once) {
        json_t *back = json_loads(once, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
        char *twice = back ? json_canonical(back) : NULL;
        if (!twice || strcmp(once, twice) != 0)
            abort();
        free(twice);
        json_decref(back);
        free(once);
    }
    json_decref(v);
    return 0;
}

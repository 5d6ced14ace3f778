#include "server/app.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"

uint64_t app_next_id(app *a)
{
    uint64_t id;
    if (id_next(&a->ids, &id) != 0) {
        /* The clock went back further than --node-id's generator can absorb: issuing an id now
         * could repeat one. Refusing to run is the only safe answer. */
        log_msg("fatal", "clock moved backwards too far");
        abort();
    }
    return id;
}

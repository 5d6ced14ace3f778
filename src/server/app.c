#include "server/app.h"

#include <stdio.h>
#include <stdlib.h>

uint64_t app_next_id(app *a)
{
    uint64_t id;
    if (id_next(&a->ids, &id) != 0) {
        /* The clock went back further than --node-id's generator can absorb: issuing an id now
         * could repeat one. Refusing to run is the only safe answer. */
        fprintf(stderr, "{\"level\":\"fatal\",\"msg\":\"clock moved backwards too far\"}\n");
        abort();
    }
    return id;
}

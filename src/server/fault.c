#include "server/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

void fault_point(const char *name)
{
    const char *faults = getenv("PAYD_FAULT");
    if (!faults)
        return;
    size_t n = strlen(name);
    for (const char *p = strstr(faults, name); p; p = strstr(p + 1, name))
        if ((p == faults || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) {
            jsonw w;
            log_begin(&w, "warn", "fault injected");
            jw_key(&w, "fault");
            jw_string(&w, name);
            log_end(&w);
            _exit(70);
        }
}

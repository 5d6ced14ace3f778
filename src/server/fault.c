#include "server/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fault_point(const char *name)
{
    const char *faults = getenv("PAYD_FAULT");
    if (!faults)
        return;
    size_t n = strlen(name);
    for (const char *p = strstr(faults, name); p; p = strstr(p + 1, name))
        if ((p == faults || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) {
            fprintf(stderr, "{\"level\":\"warn\",\"msg\":\"fault injected\",\"fault\":\"%s\"}\n",
                    name);
            _exit(70);
        }
}

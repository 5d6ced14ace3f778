/* systemd notifications for `payd serve` (service.h). */
#include "node/service.h"

#include <stdlib.h>
#include <systemd/sd-daemon.h>

bool service_manager_listens(void)
{
    const char *socket = getenv("NOTIFY_SOCKET");
    return socket && *socket;
}

int64_t service_watchdog_interval_ms(void)
{
    uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0)
        return 0;
    int64_t half_ms = (int64_t)(usec / 2000);
    return half_ms > 0 ? half_ms : 1;
}

void service_notify_ready(void)
{
    sd_notify(0, "READY=1\nSTATUS=serving");
}

void service_notify_reloading(void)
{
    sd_notify(0, "RELOADING=1\nSTATUS=reading the TLS files again");
}

void service_notify_stopping(void)
{
    sd_notify(0, "STOPPING=1\nSTATUS=draining");
}

void service_watchdog_ping(void)
{
    sd_notify(0, "WATCHDOG=1");
}

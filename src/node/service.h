#ifndef PAYD_NODE_SERVICE_H
#define PAYD_NODE_SERVICE_H
/* The service manager's side of `payd serve` (deploy/payd.service, Type=notify): systemd is told
 * when the node is ready (its listener is up and its database answers), reloading, stopping,
 * and, when the unit sets WatchdogSec, that the node is alive. Outside systemd (no
 * NOTIFY_SOCKET) every call does nothing. */
#include <stdbool.h>
#include <stdint.h>

/* Whether a service manager listens (NOTIFY_SOCKET is set). */
bool service_manager_listens(void);
/* How often to say "alive": half the unit's WatchdogSec, in ms; 0 without a watchdog. */
int64_t service_watchdog_interval_ms(void);

void service_notify_ready(void);
void service_notify_reloading(void);
void service_notify_stopping(void);
void service_watchdog_ping(void);

#endif

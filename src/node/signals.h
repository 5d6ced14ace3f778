#ifndef PAYD_NODE_SIGNALS_H
#define PAYD_NODE_SIGNALS_H
/* Graceful stop for the long-running commands (serve, processor-sim): SIGTERM and SIGINT are
 * blocked before any thread starts, so every thread inherits the mask, and the main thread
 * takes them with sigwait. SIGPIPE is ignored: a client that hangs up is not a reason to die. */
#include <signal.h>

void stop_signals_block(sigset_t *set);
/* Blocks until SIGTERM or SIGINT; returns the signal. */
int stop_signals_wait(const sigset_t *set);

#endif

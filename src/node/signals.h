#ifndef PAYD_NODE_SIGNALS_H
#define PAYD_NODE_SIGNALS_H
/* Graceful stop for the long-running commands (serve, processor-sim): SIGTERM and SIGINT are
 * blocked before any thread starts, so every thread inherits the mask, and the main thread
 * takes them with sigwait; so is SIGHUP, which asks serve to read its TLS files again. SIGPIPE is
 * ignored: a client that hangs up is not a reason to die. */
#include <signal.h>
#include <stdint.h>

void stop_signals_block(sigset_t *set);
/* Blocks until SIGTERM, SIGINT or SIGHUP; returns the signal. */
int stop_signals_wait(const sigset_t *set);
/* The same, for at most timeout_ms: 0 when none came. */
int stop_signals_wait_for(const sigset_t *set, int64_t timeout_ms);
/* Ends the process (exit 1, one log line) after_ms from now unless it has exited by then: a
 * stop never waits longer than that on a database that does not answer (a request waiting on
 * it, the lease's release, the writer's last job). Nothing acknowledged is lost by it: an
 * answer is sent only after its commit, and a key left claimed is resumed by a retry or the
 * recoverer, as after kill -9. */
void stop_deadline_arm(int64_t after_ms);
/* What serve's stop has past --shutdown-timeout for the rest: the lease's release, the store's
 * last commits. */
#define STOP_GRACE_MS 500

#endif

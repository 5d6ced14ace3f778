#ifndef PAYD_NODE_FAULT_H
#define PAYD_NODE_FAULT_H
/* Fault injection for crash and chaos tests, read from PAYD_FAULT: a comma-separated list of
 *
 *   NAME                   fault_point(NAME) kills the process on the spot (as kill -9 would)
 *   stop@NAME              fault_point(NAME) stops the whole process (SIGSTOP), once: a test
 *                          resumes it with SIGCONT, as if the machine had paused
 *   sleep@NAME=MS          fault_point(NAME) sleeps MS milliseconds, every time
 *   fail-write=N           the Nth write job fails as a database error would
 *   crash-before-commit=N  the process dies just before its Nth commit
 *   crash-after-commit=N   the process dies just after its Nth commit
 *
 * Points: before-charge, after-charge, crash-after-charge (payments), before-refund,
 * after-refund (refunds), before-capture, after-capture (captures and cancels of a hold, §17:
 * after the reserve commits and around the processor call), void-between-reads (the recoverer's
 * void decision, between its read of the key and its read of the payments),
 * claim-between-read-and-write (a takeover of a key, between its read of the row and its
 * conditional write; on a store writer's thread). PAYD_FAULT is read once; with it unset, every
 * check is a load and a test. */
#include <stdbool.h>

void fault_point(const char *name);
/* Whether fault_point(name) would make its thread sleep (sleep@NAME): a step that runs on a
 * store writer's thread goes to a worker first. */
bool fault_point_blocks(const char *name);
/* Whether PAYD_FAULT names the point at all (NAME, stop@NAME or sleep@NAME): a path that would
 * skip the point is not taken while a test stands there. */
bool fault_point_set(const char *name);
/* Store hooks (store_set_faults): count write jobs and commits against PAYD_FAULT, from the
 * moment fault_arm() is called (serve calls it once started, so N counts the jobs requests
 * and background work make, not the start's own). */
void fault_arm(void);
bool fault_fail_write_job(void);
void fault_at_commit(bool committed);

#endif

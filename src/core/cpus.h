/* How many CPUs this process may run on, the one count the thread pools size themselves to. */
#ifndef PAYD_CORE_CPUS_H
#define PAYD_CORE_CPUS_H

/* The CPUs in the process's affinity mask (taskset, a container's cpuset), else the machine's
 * online CPUs; at least 1. Threads beyond it only take turns on the same CPUs. */
int cpus_available(void);

#endif

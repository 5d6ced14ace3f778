#include "node/fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

/* PAYD_FAULT, read once: the checks run on every write job and payment, and getenv walks the
 * whole environment each time (0.3 % of the store writer's time with the variable unset). */
static const char *fault_spec;
static pthread_once_t fault_spec_once = PTHREAD_ONCE_INIT;

static void read_fault_spec(void)
{
    fault_spec = getenv("PAYD_FAULT");
}

static const char *faults_set(void)
{
    pthread_once(&fault_spec_once, read_fault_spec);
    return fault_spec;
}

/* The entry of PAYD_FAULT that is exactly `name` (up to its '=' value, if any): the value's
 * text, "" for an entry without one, NULL when absent. */
static const char *fault_entry(const char *name)
{
    const char *faults = faults_set();
    if (!faults)
        return NULL;
    size_t n = strlen(name);
    for (const char *p = strstr(faults, name); p; p = strstr(p + 1, name))
        if ((p == faults || p[-1] == ',') && (p[n] == '\0' || p[n] == ',' || p[n] == '='))
            return p[n] == '=' ? p + n + 1 : "";
    return NULL;
}

static long entry_number(const char *name)
{
    const char *v = fault_entry(name);
    return v && *v ? strtol(v, NULL, 10) : 0;
}

static void announce(const char *fault, const char *at)
{
    jsonw w;
    log_begin(&w, "warn", "fault injected");
    jw_key(&w, "fault");
    jw_string(&w, fault);
    jw_key(&w, "at");
    jw_string(&w, at);
    log_end(&w);
}

void fault_point(const char *name)
{
    if (!faults_set())
        return;
    char spec[96];
    if (fault_entry(name)) {
        announce("crash", name);
        _exit(70);
    }
    snprintf(spec, sizeof spec, "stop@%s", name);
    static atomic_bool stopped;
    if (fault_entry(spec) && !atomic_exchange(&stopped, true)) {
        announce("stop", name);
        raise(SIGSTOP); /* the whole process, every thread, until SIGCONT */
    }
    snprintf(spec, sizeof spec, "sleep@%s", name);
    const char *ms = fault_entry(spec);
    if (ms) {
        long v = strtol(ms, NULL, 10);
        announce("sleep", name);
        struct timespec pause = {v / 1000, (v % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
}

bool fault_point_blocks(const char *name)
{
    if (!faults_set())
        return false;
    char spec[96];
    snprintf(spec, sizeof spec, "sleep@%s", name);
    return fault_entry(spec) != NULL;
}

bool fault_point_set(const char *name)
{
    if (!faults_set())
        return false;
    char stop[96];
    snprintf(stop, sizeof stop, "stop@%s", name);
    return fault_entry(name) || fault_entry(stop) || fault_point_blocks(name);
}

static atomic_bool armed;

void fault_arm(void)
{
    atomic_store(&armed, true);
}

bool fault_fail_write_job(void)
{
    static atomic_long jobs;
    if (!atomic_load(&armed) || !faults_set())
        return false;
    long nth = entry_number("fail-write");
    if (nth <= 0)
        return false;
    if (atomic_fetch_add(&jobs, 1) + 1 != nth)
        return false;
    announce("fail-write", "write job");
    return true;
}

void fault_at_commit(bool committed)
{
    static atomic_long before, after;
    if (!atomic_load(&armed) || !faults_set())
        return;
    const char *name = committed ? "crash-after-commit" : "crash-before-commit";
    long nth = entry_number(name);
    if (nth > 0 && atomic_fetch_add(committed ? &after : &before, 1) + 1 == nth) {
        announce(name, "commit");
        _exit(70);
    }
}

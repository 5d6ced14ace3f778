#include "node/signals.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"

void stop_signals_block(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int stop_signals_wait(const sigset_t *set)
{
    int sig = 0;
    sigwait(set, &sig);
    return sig;
}

int stop_signals_wait_for(const sigset_t *set, int64_t timeout_ms)
{
    struct timespec wait = {timeout_ms / 1000, timeout_ms % 1000 * 1000000L};
    int sig = sigtimedwait(set, NULL, &wait);
    return sig > 0 ? sig : 0;
}

static void *stop_deadline_main(void *arg)
{
    int64_t ms = *(int64_t *)arg;
    free(arg);
    struct timespec pause = {ms / 1000, ms % 1000 * 1000000L};
    while (nanosleep(&pause, &pause) != 0)
        ;
    log_msg("error", "stop not finished within --shutdown-timeout; exiting without it");
    _exit(1);
    return NULL;
}

void stop_deadline_arm(int64_t after_ms)
{
    int64_t *arg = malloc(sizeof *arg);
    *arg = after_ms;
    pthread_t thread;
    if (pthread_create(&thread, NULL, stop_deadline_main, arg) == 0)
        pthread_detach(thread);
    else
        free(arg);
}

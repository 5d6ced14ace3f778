#include "node/signals.h"

#include <pthread.h>

void stop_signals_block(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int stop_signals_wait(const sigset_t *set)
{
    int sig = 0;
    sigwait(set, &sig);
    return sig;
}

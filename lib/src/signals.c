/*
 * signals.c - termination signals for the daemons.
 */
#include "dfc/signals.h"

#include <pthread.h>

void dfc_signals_block(sigset_t *ret_set) {
    sigemptyset(ret_set);
    sigaddset(ret_set, SIGINT);
    sigaddset(ret_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, ret_set, NULL);
    (void)signal(SIGPIPE, SIG_IGN); /* fails only for an invalid signal number */
}

int dfc_signals_wait(const sigset_t *set) {
    int sig = 0;
    while (sigwait(set, &sig) != 0) {
    }
    return sig;
}

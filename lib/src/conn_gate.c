/*
 * conn_gate.c - connections waiting for their first bytes in an accept thread's poll set
 * (conn_gate.h).
 */
#include "conn_gate.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "dfc/clock.h"

int conn_gate_init(struct conn_gate *g, int lfd, int stop_fd) {
    g->n = 0;
    g->cap = 16;
    g->pfd = calloc(CONN_GATE_FIXED + g->cap, sizeof(*g->pfd));
    g->wait = calloc(g->cap, sizeof(*g->wait));
    if (g->pfd == NULL || g->wait == NULL) {
        conn_gate_free(g);
        return -ENOMEM;
    }
    g->pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
    g->pfd[1] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
    return 0;
}

static void set_lowat(int fd, unsigned lowat) {
    int v = lowat > INT_MAX ? INT_MAX : (int)lowat;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof(v));
}

int conn_gate_add(struct conn_gate *g, int fd, unsigned lowat, int64_t deadline_ms, void *arg) {
    if (g->n == g->cap) {
        size_t cap = g->cap * 2;
        struct pollfd *p = realloc(g->pfd, (CONN_GATE_FIXED + cap) * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        g->pfd = p;
        struct conn_gate_wait *w = realloc(g->wait, cap * sizeof(*w));
        if (w == NULL) {
            return -ENOMEM;
        }
        g->wait = w;
        g->cap = cap;
    }
    if (lowat > 0) {
        set_lowat(fd, lowat);
    }
    /* events 0: poll() still reports POLLHUP and POLLERR */
    g->pfd[CONN_GATE_FIXED + g->n] = (struct pollfd){.fd = fd, .events = lowat > 0 ? POLLIN : 0};
    g->wait[g->n] = (struct conn_gate_wait){
        .deadline_ms = deadline_ms, .since_ms = dfc_mono_ms(), .lowat = lowat, .arg = arg};
    g->n++;
    return 0;
}

void conn_gate_want(struct conn_gate *g, size_t i, unsigned lowat) {
    g->wait[i].lowat = lowat;
    set_lowat(g->pfd[CONN_GATE_FIXED + i].fd, lowat);
}

int conn_gate_poll(struct conn_gate *g) {
    int timeout = -1;
    if (g->n > 0) {
        int64_t now = dfc_mono_ms();
        int64_t first = g->wait[0].deadline_ms;
        for (size_t i = 1; i < g->n; i++) {
            first = g->wait[i].deadline_ms < first ? g->wait[i].deadline_ms : first;
        }
        int64_t left = first - now;
        timeout = left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
    }
    for (size_t i = 0; i < CONN_GATE_FIXED + g->n; i++) {
        g->pfd[i].revents = 0;
    }
    return poll(g->pfd, CONN_GATE_FIXED + g->n, timeout);
}

int conn_gate_take(struct conn_gate *g, size_t i, void **ret_arg) {
    int fd = g->pfd[CONN_GATE_FIXED + i].fd;
    bool watch = g->wait[i].lowat == 0;
    if (ret_arg != NULL) {
        *ret_arg = g->wait[i].arg;
    }
    g->n--;
    g->pfd[CONN_GATE_FIXED + i] = g->pfd[CONN_GATE_FIXED + g->n];
    g->wait[i] = g->wait[g->n];
    if (!watch) {
        set_lowat(fd, 1);
    }
    return fd;
}

size_t conn_gate_oldest(const struct conn_gate *g) {
    size_t oldest = 0;
    for (size_t i = 1; i < g->n; i++) {
        if (g->wait[i].since_ms < g->wait[oldest].since_ms) {
            oldest = i;
        }
    }
    return oldest;
}

void conn_gate_free(struct conn_gate *g) {
    free(g->pfd);
    free(g->wait);
    g->pfd = NULL;
    g->wait = NULL;
    g->n = g->cap = 0;
}

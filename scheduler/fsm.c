/*
 * fsm.c - the task and peer state machines as transition tables (upstream's looplab/fsm
 * event lists, docs/dragonfly-compat.md "Scheduler on Redis").
 *
 * Each table row is one event with the set of states it may fire from and the state it leads
 * to, exactly as upstream declares them; the one deliberate difference is the peer's
 * Download event, which also fires from Running (a no-op), because a dfdaemon sends
 * "download started" again after every reschedule and upstream's refusal ends that download.
 * A refused event leaves the state unchanged and reports looplab's text, so messages match
 * what a Go scheduler answers.
 */
#include "fsm.h"

#include <stddef.h>
#include <string.h>

/* ---- names ---- */

static const char *const task_state_names[] = {
    [SCHED_TASK_PENDING] = "Pending",
    [SCHED_TASK_UPLOADING] = "Uploading",
    [SCHED_TASK_SUCCEEDED] = "Succeeded",
    [SCHED_TASK_FAILED] = "Failed",
};
static const char *const task_event_names[] = {
    [SCHED_TASK_EV_UPLOAD] = "Upload",
    [SCHED_TASK_EV_SUCCEEDED] = "Succeeded",
    [SCHED_TASK_EV_FAILED] = "Failed",
};
static const char *const peer_state_names[] = {
    [SCHED_PEER_PENDING] = "Pending",
    [SCHED_PEER_UPLOADING] = "Uploading",
    [SCHED_PEER_RECEIVED_EMPTY] = "ReceivedEmpty",
    [SCHED_PEER_RECEIVED_NORMAL] = "ReceivedNormal",
    [SCHED_PEER_RUNNING] = "Running",
    [SCHED_PEER_SUCCEEDED] = "Succeeded",
    [SCHED_PEER_FAILED] = "Failed",
};
static const char *const peer_event_names[] = {
    [SCHED_PEER_EV_UPLOAD] = "Upload",
    [SCHED_PEER_EV_REGISTER_EMPTY] = "RegisterEmpty",
    [SCHED_PEER_EV_REGISTER_NORMAL] = "RegisterNormal",
    [SCHED_PEER_EV_DOWNLOAD] = "Download",
    [SCHED_PEER_EV_SUCCEEDED] = "Succeeded",
    [SCHED_PEER_EV_FAILED] = "Failed",
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *name_of(const char *const *names, size_t n, int v) {
    if (v < 0 || (size_t)v >= n || names[v] == NULL) {
        return "Unknown";
    }
    return names[v];
}

const char *sched_task_state_name(enum sched_task_state s) {
    return name_of(task_state_names, N_OF(task_state_names), (int)s);
}

const char *sched_peer_state_name(enum sched_peer_state s) {
    return name_of(peer_state_names, N_OF(peer_state_names), (int)s);
}

const char *sched_task_event_name(enum sched_task_event e) {
    return name_of(task_event_names, N_OF(task_event_names), (int)e);
}

const char *sched_peer_event_name(enum sched_peer_event e) {
    return name_of(peer_event_names, N_OF(peer_event_names), (int)e);
}

static int parse_name(const char *const *names, size_t n, const char *name, int *out) {
    if (name == NULL) {
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (names[i] != NULL && strcmp(names[i], name) == 0) {
            *out = (int)i;
            return 0;
        }
    }
    return -EINVAL;
}

int sched_task_state_parse(const char *name, enum sched_task_state *out) {
    int v;
    int r = parse_name(task_state_names, N_OF(task_state_names), name, &v);
    if (r == 0) {
        *out = (enum sched_task_state)v;
    }
    return r;
}

int sched_peer_state_parse(const char *name, enum sched_peer_state *out) {
    int v;
    int r = parse_name(peer_state_names, N_OF(peer_state_names), name, &v);
    if (r == 0) {
        *out = (enum sched_peer_state)v;
    }
    return r;
}

/* ---- transitions ---- */

#define BIT(s) (1u << (s))

struct transition {
    unsigned from; /* bit set of source states */
    int to;
};

static const struct transition task_table[] = {
    [SCHED_TASK_EV_UPLOAD] = {BIT(SCHED_TASK_PENDING) | BIT(SCHED_TASK_FAILED),
                              SCHED_TASK_UPLOADING},
    [SCHED_TASK_EV_SUCCEEDED] = {BIT(SCHED_TASK_UPLOADING), SCHED_TASK_SUCCEEDED},
    [SCHED_TASK_EV_FAILED] = {BIT(SCHED_TASK_UPLOADING), SCHED_TASK_FAILED},
};

static const struct transition peer_table[] = {
    [SCHED_PEER_EV_UPLOAD] = {BIT(SCHED_PEER_PENDING) | BIT(SCHED_PEER_FAILED),
                              SCHED_PEER_UPLOADING},
    [SCHED_PEER_EV_REGISTER_EMPTY] = {BIT(SCHED_PEER_PENDING) | BIT(SCHED_PEER_FAILED),
                                      SCHED_PEER_RECEIVED_EMPTY},
    [SCHED_PEER_EV_REGISTER_NORMAL] = {BIT(SCHED_PEER_PENDING) | BIT(SCHED_PEER_FAILED),
                                       SCHED_PEER_RECEIVED_NORMAL},
    /* Running -> Running on purpose (see the file comment). */
    [SCHED_PEER_EV_DOWNLOAD] = {BIT(SCHED_PEER_RECEIVED_EMPTY) | BIT(SCHED_PEER_RECEIVED_NORMAL) |
                                    BIT(SCHED_PEER_RUNNING),
                                SCHED_PEER_RUNNING},
    [SCHED_PEER_EV_SUCCEEDED] = {BIT(SCHED_PEER_UPLOADING) | BIT(SCHED_PEER_RUNNING),
                                 SCHED_PEER_SUCCEEDED},
    [SCHED_PEER_EV_FAILED] = {BIT(SCHED_PEER_UPLOADING) | BIT(SCHED_PEER_RUNNING),
                              SCHED_PEER_FAILED},
};

/* looplab/fsm's InvalidEventError text. */
static int refuse(struct dfc_error *err, const char *event, const char *state) {
    return dfc_error_set(err, DFC_E_FAILED_PRECONDITION,
                         "event %s inappropriate in current state %s", event, state);
}

int sched_task_fire(enum sched_task_state *s, enum sched_task_event e, struct dfc_error *err) {
    if ((unsigned)e >= N_OF(task_table) || (unsigned)*s >= N_OF(task_state_names) ||
        !(task_table[e].from & BIT(*s))) {
        return refuse(err, sched_task_event_name(e), sched_task_state_name(*s));
    }
    *s = (enum sched_task_state)task_table[e].to;
    return 0;
}

int sched_peer_fire(enum sched_peer_state *s, enum sched_peer_event e, struct dfc_error *err) {
    if ((unsigned)e >= N_OF(peer_table) || (unsigned)*s >= N_OF(peer_state_names) ||
        !(peer_table[e].from & BIT(*s))) {
        return refuse(err, sched_peer_event_name(e), sched_peer_state_name(*s));
    }
    *s = (enum sched_peer_state)peer_table[e].to;
    return 0;
}

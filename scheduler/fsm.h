/*
 * fsm.h - the task and peer state machines of upstream's scheduler (looplab/fsm tables),
 * with upstream's state names as stored in Redis.
 *
 * Task (initial Pending): Upload: Pending|Failed -> Uploading; Succeeded: Uploading ->
 * Succeeded; Failed: Uploading -> Failed.
 * Peer (initial Pending): Upload: Pending|Failed -> Uploading; RegisterEmpty: Pending|Failed ->
 * ReceivedEmpty; RegisterNormal: Pending|Failed -> ReceivedNormal; Download: ReceivedEmpty|
 * ReceivedNormal -> Running (and, on purpose unlike upstream, Running -> Running so a repeated
 * "download started" after a reschedule is accepted); Succeeded: Uploading|Running ->
 * Succeeded; Failed: Uploading|Running -> Failed.
 */
#ifndef SCHED_FSM_H
#define SCHED_FSM_H

#include "dfc/error.h"

enum sched_task_state {
    SCHED_TASK_PENDING,
    SCHED_TASK_UPLOADING,
    SCHED_TASK_SUCCEEDED,
    SCHED_TASK_FAILED,
};
enum sched_task_event {
    SCHED_TASK_EV_UPLOAD,
    SCHED_TASK_EV_SUCCEEDED,
    SCHED_TASK_EV_FAILED,
};

enum sched_peer_state {
    SCHED_PEER_PENDING,
    SCHED_PEER_UPLOADING,
    SCHED_PEER_RECEIVED_EMPTY,
    SCHED_PEER_RECEIVED_NORMAL,
    SCHED_PEER_RUNNING,
    SCHED_PEER_SUCCEEDED,
    SCHED_PEER_FAILED,
};
enum sched_peer_event {
    SCHED_PEER_EV_UPLOAD,
    SCHED_PEER_EV_REGISTER_EMPTY,
    SCHED_PEER_EV_REGISTER_NORMAL,
    SCHED_PEER_EV_DOWNLOAD,
    SCHED_PEER_EV_SUCCEEDED,
    SCHED_PEER_EV_FAILED,
};

/* Upstream's names: "Pending", "Uploading", "Succeeded", "Failed", "ReceivedEmpty",
 * "ReceivedNormal", "Running"; events "Upload", "RegisterEmpty", ... */
const char *sched_task_state_name(enum sched_task_state s);
const char *sched_peer_state_name(enum sched_peer_state s);
const char *sched_task_event_name(enum sched_task_event e);
const char *sched_peer_event_name(enum sched_peer_event e);
/* Parses a stored name; -EINVAL for anything else. */
int sched_task_state_parse(const char *name, enum sched_task_state *out);
int sched_peer_state_parse(const char *name, enum sched_peer_state *out);

/* Moves *s by event e, or returns DFC_E_FAILED_PRECONDITION with err set to upstream's text
 * "event Download inappropriate in current state Succeeded" and *s unchanged. */
int sched_task_fire(enum sched_task_state *s, enum sched_task_event e, struct dfc_error *err);
int sched_peer_fire(enum sched_peer_state *s, enum sched_peer_event e, struct dfc_error *err);

#endif /* SCHED_FSM_H */

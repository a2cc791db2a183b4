/*
 * fake_dfdaemon.h - small fake DfdaemonUpload servers for the scheduler's placement tests: a
 * real gRPC server (lib's rpc_server) on a free 127.0.0.1 TCP port, serving the four methods
 * the scheduler calls on a dfdaemon (UpdatePersistentCacheTask, DownloadPersistentCacheTask,
 * DeletePersistentCacheTask, StatPersistentCacheTask), recording each call. Stat answers the
 * scheduler's record of a task the fake holds (pulled, or fake_dfdaemon_hold), else NOT_FOUND.
 *
 * It stands in for the dfdaemon side, which comes with the P2P issue: on
 * DownloadPersistentCacheTask a real dfdaemon pulls the task from its parents and, registering
 * with the scheduler as it does, ends up with a Succeeded peer of the task on its host in
 * Redis. The fake does only that last part, directly through the store API (when given a
 * store): it stores a Succeeded peer with the request's persistent flag for its host, then
 * answers one "started" message and ends the stream OK. No content moves.
 *
 * Modes for fault tests: FAIL answers INTERNAL without recording a peer; HANG holds the call
 * until the caller's deadline or cancellation (or the fake stops). A delay makes calls overlap
 * in race tests. Thread-safe. Ownership: the fake borrows the store; free with
 * fake_dfdaemon_stop().
 */
#ifndef DFC_TEST_FAKE_DFDAEMON_H
#define DFC_TEST_FAKE_DFDAEMON_H

#include <stdbool.h>
#include <stddef.h>

struct sched_store;
struct fake_dfdaemon;

enum fake_dfdaemon_mode { FAKE_DFDAEMON_OK, FAKE_DFDAEMON_FAIL, FAKE_DFDAEMON_HANG };

struct fake_dfdaemon_call {
    char method[40]; /* "DownloadPersistentCacheTask", ... */
    char task_id[160];
    bool persistent;
    bool has_remote_ip;
    char remote_ip[64];
    char tag[64], application[64];
};

/* Starts a fake for host_id (copied) on 127.0.0.1:<free port>; store may be NULL (calls are
 * then only recorded). Returns 0 or a negative code. */
int fake_dfdaemon_start(struct sched_store *store, const char *host_id, struct fake_dfdaemon **ret);
void fake_dfdaemon_stop(struct fake_dfdaemon *f); /* NULL is fine */

int fake_dfdaemon_port(const struct fake_dfdaemon *f);
void fake_dfdaemon_set_mode(struct fake_dfdaemon *f, enum fake_dfdaemon_mode mode);
void fake_dfdaemon_set_delay_ms(struct fake_dfdaemon *f, int ms);

/* Calls of method received so far (NULL: of every method). */
size_t fake_dfdaemon_count(struct fake_dfdaemon *f, const char *method);
/* Copies the i-th call received; false past the end. */
bool fake_dfdaemon_call(struct fake_dfdaemon *f, size_t i, struct fake_dfdaemon_call *out);
void fake_dfdaemon_clear(struct fake_dfdaemon *f);
/* From now on the fake holds a copy of task_id (Stat answers it). */
void fake_dfdaemon_hold(struct fake_dfdaemon *f, const char *task_id);

#endif /* DFC_TEST_FAKE_DFDAEMON_H */

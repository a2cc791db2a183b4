/* Tests for scheduler/fsm.c: every (state, event) pair of both machines, legal or refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fsm.h"

/* The legal moves, written out from upstream's tables (plus Running -Download-> Running). */
struct move {
    int from, event, to;
};

static const struct move task_moves[] = {
    {SCHED_TASK_PENDING, SCHED_TASK_EV_UPLOAD, SCHED_TASK_UPLOADING},
    {SCHED_TASK_FAILED, SCHED_TASK_EV_UPLOAD, SCHED_TASK_UPLOADING},
    {SCHED_TASK_UPLOADING, SCHED_TASK_EV_SUCCEEDED, SCHED_TASK_SUCCEEDED},
    {SCHED_TASK_UPLOADING, SCHED_TASK_EV_FAILED, SCHED_TASK_FAILED},
};

static const struct move peer_moves[] = {
    {SCHED_PEER_PENDING, SCHED_PEER_EV_UPLOAD, SCHED_PEER_UPLOADING},
    {SCHED_PEER_FAILED, SCHED_PEER_EV_UPLOAD, SCHED_PEER_UPLOADING},
    {SCHED_PEER_PENDING, SCHED_PEER_EV_REGISTER_EMPTY, SCHED_PEER_RECEIVED_EMPTY},
    {SCHED_PEER_FAILED, SCHED_PEER_EV_REGISTER_EMPTY, SCHED_PEER_RECEIVED_EMPTY},
    {SCHED_PEER_PENDING, SCHED_PEER_EV_REGISTER_NORMAL, SCHED_PEER_RECEIVED_NORMAL},
    {SCHED_PEER_FAILED, SCHED_PEER_EV_REGISTER_NORMAL, SCHED_PEER_RECEIVED_NORMAL},
    {SCHED_PEER_RECEIVED_EMPTY, SCHED_PEER_EV_DOWNLOAD, SCHED_PEER_RUNNING},
    {SCHED_PEER_RECEIVED_NORMAL, SCHED_PEER_EV_DOWNLOAD, SCHED_PEER_RUNNING},
    {SCHED_PEER_RUNNING, SCHED_PEER_EV_DOWNLOAD, SCHED_PEER_RUNNING},
    {SCHED_PEER_UPLOADING, SCHED_PEER_EV_SUCCEEDED, SCHED_PEER_SUCCEEDED},
    {SCHED_PEER_RUNNING, SCHED_PEER_EV_SUCCEEDED, SCHED_PEER_SUCCEEDED},
    {SCHED_PEER_UPLOADING, SCHED_PEER_EV_FAILED, SCHED_PEER_FAILED},
    {SCHED_PEER_RUNNING, SCHED_PEER_EV_FAILED, SCHED_PEER_FAILED},
};

static int find(const struct move *m, size_t n, int from, int event) {
    for (size_t i = 0; i < n; i++) {
        if (m[i].from == from && m[i].event == event) {
            return m[i].to;
        }
    }
    return -1;
}

static void test_names(void **state) {
    const char *task[] = {"Pending", "Uploading", "Succeeded", "Failed"};
    for (int s = 0; s < 4; s++) {
        assert_string_equal(sched_task_state_name((enum sched_task_state)s), task[s]);
        enum sched_task_state out = SCHED_TASK_FAILED;
        assert_int_equal(sched_task_state_parse(task[s], &out), 0);
        assert_int_equal(out, s);
    }
    const char *peer[] = {"Pending", "Uploading", "ReceivedEmpty", "ReceivedNormal",
                          "Running", "Succeeded", "Failed"};
    for (int s = 0; s < 7; s++) {
        assert_string_equal(sched_peer_state_name((enum sched_peer_state)s), peer[s]);
        enum sched_peer_state out = SCHED_PEER_FAILED;
        assert_int_equal(sched_peer_state_parse(peer[s], &out), 0);
        assert_int_equal(out, s);
    }
    const char *tev[] = {"Upload", "Succeeded", "Failed"};
    for (int e = 0; e < 3; e++) {
        assert_string_equal(sched_task_event_name((enum sched_task_event)e), tev[e]);
    }
    const char *pev[] = {"Upload",   "RegisterEmpty", "RegisterNormal",
                         "Download", "Succeeded",     "Failed"};
    for (int e = 0; e < 6; e++) {
        assert_string_equal(sched_peer_event_name((enum sched_peer_event)e), pev[e]);
    }
    enum sched_task_state ts = SCHED_TASK_SUCCEEDED;
    assert_int_equal(sched_task_state_parse("pending", &ts), -EINVAL); /* case matters */
    assert_int_equal(sched_task_state_parse("", &ts), -EINVAL);
    assert_int_equal(sched_task_state_parse("Running", &ts), -EINVAL); /* a peer state */
    assert_int_equal(sched_task_state_parse(NULL, &ts), -EINVAL);
    assert_int_equal(ts, SCHED_TASK_SUCCEEDED);
    enum sched_peer_state ps = SCHED_PEER_RUNNING;
    assert_int_equal(sched_peer_state_parse("Runnin", &ps), -EINVAL);
    assert_int_equal(sched_peer_state_parse("Running ", &ps), -EINVAL);
    assert_int_equal(ps, SCHED_PEER_RUNNING);
}

static void test_task_every_pair(void **state) {
    int legal = 0;
    for (int s = 0; s < 4; s++) {
        for (int e = 0; e < 3; e++) {
            enum sched_task_state cur = (enum sched_task_state)s;
            struct dfc_error err = {0};
            int want = find(task_moves, sizeof(task_moves) / sizeof(task_moves[0]), s, e);
            int r = sched_task_fire(&cur, (enum sched_task_event)e, &err);
            if (want >= 0) {
                assert_int_equal(r, 0);
                assert_int_equal(cur, want);
                legal++;
            } else {
                char msg[128];
                snprintf(msg, sizeof(msg), "event %s inappropriate in current state %s",
                         sched_task_event_name((enum sched_task_event)e),
                         sched_task_state_name((enum sched_task_state)s));
                assert_int_equal(r, DFC_E_FAILED_PRECONDITION);
                assert_int_equal(err.code, DFC_E_FAILED_PRECONDITION);
                assert_string_equal(err.msg, msg);
                assert_int_equal(cur, s); /* unchanged */
            }
        }
    }
    assert_int_equal(legal, 4);
}

static void test_peer_every_pair(void **state) {
    int legal = 0;
    for (int s = 0; s < 7; s++) {
        for (int e = 0; e < 6; e++) {
            enum sched_peer_state cur = (enum sched_peer_state)s;
            struct dfc_error err = {0};
            int want = find(peer_moves, sizeof(peer_moves) / sizeof(peer_moves[0]), s, e);
            int r = sched_peer_fire(&cur, (enum sched_peer_event)e, &err);
            if (want >= 0) {
                assert_int_equal(r, 0);
                assert_int_equal(cur, want);
                legal++;
            } else {
                char msg[128];
                snprintf(msg, sizeof(msg), "event %s inappropriate in current state %s",
                         sched_peer_event_name((enum sched_peer_event)e),
                         sched_peer_state_name((enum sched_peer_state)s));
                assert_int_equal(r, DFC_E_FAILED_PRECONDITION);
                assert_string_equal(err.msg, msg);
                assert_int_equal(cur, s);
            }
        }
    }
    assert_int_equal(legal, 13);
}

/* The messages upstream sends, spelled out once by hand. */
static void test_upstream_texts(void **state) {
    struct dfc_error err;
    enum sched_task_state t = SCHED_TASK_SUCCEEDED;
    assert_int_equal(sched_task_fire(&t, SCHED_TASK_EV_UPLOAD, &err), DFC_E_FAILED_PRECONDITION);
    assert_string_equal(err.msg, "event Upload inappropriate in current state Succeeded");
    enum sched_peer_state p = SCHED_PEER_SUCCEEDED;
    assert_int_equal(sched_peer_fire(&p, SCHED_PEER_EV_SUCCEEDED, &err), DFC_E_FAILED_PRECONDITION);
    assert_string_equal(err.msg, "event Succeeded inappropriate in current state Succeeded");
    p = SCHED_PEER_PENDING;
    assert_int_equal(sched_peer_fire(&p, SCHED_PEER_EV_DOWNLOAD, &err), DFC_E_FAILED_PRECONDITION);
    assert_string_equal(err.msg, "event Download inappropriate in current state Pending");
    /* A NULL err is allowed. */
    assert_int_equal(sched_peer_fire(&p, SCHED_PEER_EV_SUCCEEDED, NULL), DFC_E_FAILED_PRECONDITION);
}

/* Fix on purpose: a repeated "download started" after a reschedule is accepted. */
static void test_fix_repeated_download_started(void **state) {
    struct dfc_error err;
    enum sched_peer_state p = SCHED_PEER_PENDING;
    assert_int_equal(sched_peer_fire(&p, SCHED_PEER_EV_REGISTER_NORMAL, &err), 0);
    assert_int_equal(sched_peer_fire(&p, SCHED_PEER_EV_DOWNLOAD, &err), 0);
    assert_int_equal(sched_peer_fire(&p, SCHED_PEER_EV_DOWNLOAD, &err), 0);
    assert_int_equal(p, SCHED_PEER_RUNNING);
    assert_int_equal(sched_peer_fire(&p, SCHED_PEER_EV_SUCCEEDED, &err), 0);
    assert_int_equal(p, SCHED_PEER_SUCCEEDED);
}

/* Out-of-range values (a corrupt caller) are refused, never indexed. */
static void test_out_of_range(void **state) {
    struct dfc_error err;
    enum sched_task_state t = SCHED_TASK_PENDING;
    assert_int_equal(sched_task_fire(&t, (enum sched_task_event)7, &err),
                     DFC_E_FAILED_PRECONDITION);
    assert_int_equal(t, SCHED_TASK_PENDING);
    t = (enum sched_task_state)9;
    assert_int_equal(sched_task_fire(&t, SCHED_TASK_EV_UPLOAD, &err), DFC_E_FAILED_PRECONDITION);
    assert_string_equal(err.msg, "event Upload inappropriate in current state Unknown");
    enum sched_peer_state p = (enum sched_peer_state) - 1;
    assert_int_equal(sched_peer_fire(&p, SCHED_PEER_EV_UPLOAD, &err), DFC_E_FAILED_PRECONDITION);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_task_every_pair),
        cmocka_unit_test(test_peer_every_pair),
        cmocka_unit_test(test_upstream_texts),
        cmocka_unit_test(test_fix_repeated_download_started),
        cmocka_unit_test(test_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

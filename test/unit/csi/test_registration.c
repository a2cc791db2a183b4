/*
 * Tests for csi/registration.c: kubelet's plugin registration served on a real Unix socket and
 * called with a real gRPC client, the way kubelet's plugin watcher calls it (GetInfo, then
 * NotifyRegistrationStatus); bad configuration leaves no socket; stop removes the socket.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dfc/rpc_client.h"
#include "kubelet/pluginregistration.pb-c.h"
#include "registration.h"
#include "test_support.h"

#define DRIVER   "uds.csi.dragonflyoss.io"
#define ENDPOINT "/var/lib/kubelet/plugins/uds.csi.dragonflyoss.io/csi.sock"

static struct dfc_rpc_client_method get_info_m, notify_m;
static const struct dfc_rpc_client_row client_methods[] = {
    DFC_RPC_CLIENT_METHOD(pluginregistration__registration, "GetInfo", &get_info_m),
    DFC_RPC_CLIENT_METHOD(pluginregistration__registration, "NotifyRegistrationStatus", &notify_m),
};

struct fx {
    char dir[256], sock[400];
    struct csi_registration reg;
    struct dfc_rpc_client *client;
};

static int setup(void **state) {
    struct fx *f = calloc(1, sizeof(*f));
    test_mkdtemp(f->dir, sizeof(f->dir), "csi-registration");
    snprintf(f->sock, sizeof(f->sock), "%s/%s-reg.sock", f->dir, DRIVER);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    struct fx *f = *state;
    dfc_rpc_client_free(f->client);
    csi_registration_stop(&f->reg);
    test_rmtree(f->dir);
    free(f);
    return 0;
}

static void start(struct fx *f) {
    struct csi_registration_config cfg = {
        .dir = f->dir, .driver_name = DRIVER, .endpoint = ENDPOINT};
    struct dfc_error err;
    assert_int_equal(csi_registration_start(&f->reg, &cfg, &err), 0);
    char target[420];
    snprintf(target, sizeof(target), "unix:%s", f->sock);
    assert_int_equal(dfc_rpc_client_new(target, NULL, &f->client, &err), 0);
}

static void notify(struct fx *f, bool registered, const char *error) {
    Pluginregistration__RegistrationStatus req = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
    req.plugin_registered = registered;
    req.error = (char *)error;
    ProtobufCMessage *resp = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_unary(f->client, &notify_m, &req.base, 5000, &resp, &err), 0);
    dfc_rpc_msg_free(resp);
}

/* kubelet's sequence: GetInfo names a CSI plugin, its driver, the endpoint as kubelet sees it
 * and version 1.0.0; NotifyRegistrationStatus records kubelet's verdict, either way. */
static void test_get_info_then_notify(void **state) {
    struct fx *f = *state;
    start(f);
    struct stat st;
    assert_int_equal(stat(f->sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);

    Pluginregistration__InfoRequest req = PLUGINREGISTRATION__INFO_REQUEST__INIT;
    ProtobufCMessage *m = NULL;
    struct dfc_error err;
    assert_int_equal(dfc_rpc_unary(f->client, &get_info_m, &req.base, 5000, &m, &err), 0);
    Pluginregistration__PluginInfo *info = (void *)m;
    assert_string_equal(info->type, "CSIPlugin");
    assert_string_equal(info->name, DRIVER);
    assert_string_equal(info->endpoint, ENDPOINT);
    assert_int_equal(info->n_supported_versions, 1);
    assert_string_equal(info->supported_versions[0], "1.0.0");
    dfc_rpc_msg_free(m);

    assert_int_equal(atomic_load(&f->reg.status), 0);
    notify(f, true, "");
    assert_int_equal(atomic_load(&f->reg.status), 1);
    notify(f, false, "plugin name already registered");
    assert_int_equal(atomic_load(&f->reg.status), -1);
}

/* Stopping removes the socket, which is what makes kubelet deregister the plugin; a second
 * stop is harmless. */
static void test_stop_removes_socket(void **state) {
    struct fx *f = *state;
    start(f);
    dfc_rpc_client_free(f->client);
    f->client = NULL;
    csi_registration_stop(&f->reg);
    struct stat st;
    assert_int_equal(stat(f->sock, &st), -1);
    assert_int_equal(errno, ENOENT);
    csi_registration_stop(&f->reg);
}

/* Bad configuration is refused with the option's name and leaves no socket behind. */
static void test_bad_config(void **state) {
    struct fx *f = *state;
    struct dfc_error err;
    struct csi_registration_config rel = {
        .dir = "plugins_registry", .driver_name = DRIVER, .endpoint = ENDPOINT};
    assert_int_equal(csi_registration_start(&f->reg, &rel, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "kubelet-registration-dir"));

    struct csi_registration_config ep = {
        .dir = f->dir, .driver_name = DRIVER, .endpoint = "csi.sock"};
    assert_int_equal(csi_registration_start(&f->reg, &ep, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "kubelet-registration-path"));

    /* a directory whose socket path does not fit in sun_path */
    char deep[512];
    snprintf(deep, sizeof(deep), "%s/%0200d", f->dir, 0);
    assert_int_equal(mkdir(deep, 0755), 0);
    struct csi_registration_config lng = {.dir = deep, .driver_name = DRIVER, .endpoint = ENDPOINT};
    assert_int_equal(csi_registration_start(&f->reg, &lng, &err), -ENAMETOOLONG);
    assert_non_null(strstr(err.msg, "kubelet-registration-dir"));

    /* a directory that does not exist */
    char missing[400];
    snprintf(missing, sizeof(missing), "%s/missing", f->dir);
    struct csi_registration_config gone = {
        .dir = missing, .driver_name = DRIVER, .endpoint = ENDPOINT};
    assert_true(csi_registration_start(&f->reg, &gone, &err) < 0);
    assert_non_null(strstr(err.msg, "kubelet-registration-dir"));

    struct stat st;
    assert_int_equal(stat(f->sock, &st), -1);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "test -z \"$(find '%s' -type s)\"", f->dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    struct dfc_error err;
    if (dfc_rpc_client_resolve(client_methods, DFC_RPC_N(client_methods), &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_get_info_then_notify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_removes_socket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_config, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

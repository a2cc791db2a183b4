/*
 * csi_cycle.c - latency of a NodePublishVolume + NodeUnpublishVolume cycle against a running
 * csi-plugin, over its real socket, with real bind mounts. Prints p50/p99/max over N cycles
 * and the mount table's size before and after (it must not grow).
 *
 *   usage: bench_csi_cycle [--hold N STORE_DIR] CSI_SOCKET TARGET_PATH [cycles [KEY=VALUE...]]
 * KEY=VALUE pairs are the volume's context: taskID=<id> makes it a content volume
 * (docs/content-volumes.md). With --hold, N more volumes of the same context are published
 * first (on TARGET_PATH-hold<i>) and the used bytes of STORE_DIR's filesystem compared before
 * and after them, then they are unpublished.
 * Run it in the same (private) mount namespace as the plugin: hack/bench/csi.sh does.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "csi/csi.pb-c.h"
#include "dfc/rpc_client.h"

static unsigned mount_count(void) {
    FILE *f = fopen("/proc/self/mountinfo", "r");
    unsigned n = 0;
    for (int c; (c = fgetc(f)) != EOF;) {
        n += c == '\n';
    }
    fclose(f);
    return n;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The bytes in use on path's filesystem; -1 when it cannot be read. */
static double used_bytes(const char *path) {
    struct statvfs st;
    if (path == NULL || statvfs(path, &st) < 0) {
        return -1;
    }
    return (double)(st.f_blocks - st.f_bfree) * (double)st.f_frsize;
}

static int call(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *m,
                const ProtobufCMessage *req, const char *what) {
    struct dfc_error err;
    ProtobufCMessage *resp = NULL;
    if (dfc_rpc_unary(c, m, req, 60000, &resp, &err) < 0) {
        fprintf(stderr, "%s: %s\n", what, dfc_error_msg(&err));
        return -1;
    }
    dfc_rpc_msg_free(resp);
    return 0;
}

/* Publishes n volumes like pub on TARGET-hold<i> and reports the store's growth; unpublishes
 * them. 0, or -1 after a failed call. */
static int hold(struct dfc_rpc_client *c, const struct dfc_rpc_client_method *publish,
                const struct dfc_rpc_client_method *unpublish,
                Csi__V1__NodePublishVolumeRequest *pub, int n, const char *store) {
    const char *base = pub->target_path;
    char target[4200], vol[64];
    Csi__V1__NodeUnpublishVolumeRequest unpub = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
    double before = used_bytes(store);
    int r = 0;
    for (int i = 0; i < n && r == 0; i++) {
        snprintf(target, sizeof(target), "%s-hold%d", base, i);
        snprintf(vol, sizeof(vol), "csi-bench-hold%d", i);
        pub->target_path = target;
        pub->volume_id = vol;
        r = call(c, publish, &pub->base, "publish (hold)");
    }
    double after = used_bytes(store);
    printf("  %d volumes held: the store's filesystem used %.1f MiB before, %.1f MiB with them "
           "(%+.1f MiB)\n",
           n, before / 1048576, after / 1048576, (after - before) / 1048576);
    for (int i = 0; i < n; i++) {
        snprintf(target, sizeof(target), "%s-hold%d", base, i);
        snprintf(vol, sizeof(vol), "csi-bench-hold%d", i);
        unpub.target_path = target;
        unpub.volume_id = vol;
        if (call(c, unpublish, &unpub.base, "unpublish (hold)") < 0) {
            r = -1;
        }
    }
    pub->target_path = (char *)base;
    pub->volume_id = "csi-bench";
    return r;
}

int main(int argc, char **argv) {
    int n_hold = 0;
    const char *store = NULL;
    if (argc > 3 && strcmp(argv[1], "--hold") == 0) {
        n_hold = (int)strtol(argv[2], NULL, 10);
        store = argv[3];
        argv += 3;
        argc -= 3;
    }
    if (argc < 3 || n_hold < 0 || n_hold > 1000) {
        fprintf(stderr, "usage: bench_csi_cycle [--hold N STORE_DIR] CSI_SOCKET TARGET_PATH "
                        "[cycles [KEY=VALUE...]]\n");
        return 2;
    }
    int cycles = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 1000;
    if (cycles <= 0 || cycles > 1000000) {
        fprintf(stderr, "cycles must be 1..1000000\n");
        return 2;
    }
    char target[4200];
    snprintf(target, sizeof(target), "unix:%s", argv[1]);
    struct dfc_error err;
    struct dfc_rpc_client_method publish, unpublish;
    const struct dfc_rpc_client_row methods[] = {
        DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodePublishVolume", &publish),
        DFC_RPC_CLIENT_METHOD(csi__v1__node, "NodeUnpublishVolume", &unpublish),
    };
    if (dfc_rpc_client_resolve(methods, DFC_RPC_N(methods), &err) < 0) {
        fprintf(stderr, "%s\n", dfc_error_msg(&err));
        return 1;
    }
    struct dfc_rpc_client *c;
    if (dfc_rpc_client_new(target, NULL, &c, &err) < 0) {
        fprintf(stderr, "%s\n", dfc_error_msg(&err));
        return 1;
    }
    Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
    Csi__V1__VolumeCapability__MountVolume mount = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
    Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
    mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
    cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
    cap.mount = &mount;
    cap.access_mode = &mode;
    Csi__V1__NodePublishVolumeRequest pub = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
    pub.volume_id = "csi-bench";
    pub.target_path = argv[2];
    pub.volume_capability = &cap;
    pub.readonly = 1;
    Csi__V1__NodeUnpublishVolumeRequest unpub = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
    unpub.volume_id = "csi-bench";
    unpub.target_path = argv[2];
    /* The volume's context, from the KEY=VALUE arguments (at most 16). */
    Csi__V1__NodePublishVolumeRequest__VolumeContextEntry entries[16], *ctx[16];
    char keys[16][64];
    bool content = false;
    size_t n_ctx = 0;
    for (int i = 4; i < argc && n_ctx < 16; i++) {
        const char *eq = strchr(argv[i], '=');
        if (eq == NULL || (size_t)(eq - argv[i]) >= sizeof(keys[0])) {
            fprintf(stderr, "`%s` is not KEY=VALUE\n", argv[i]);
            return 2;
        }
        snprintf(keys[n_ctx], sizeof(keys[0]), "%.*s", (int)(eq - argv[i]), argv[i]);
        csi__v1__node_publish_volume_request__volume_context_entry__init(&entries[n_ctx]);
        entries[n_ctx].key = keys[n_ctx];
        entries[n_ctx].value = (char *)eq + 1;
        content =
            content || strcmp(keys[n_ctx], "taskID") == 0 || strcmp(keys[n_ctx], "files") == 0;
        ctx[n_ctx] = &entries[n_ctx];
        n_ctx++;
    }
    pub.volume_context = ctx;
    pub.n_volume_context = n_ctx;
    if (n_hold > 0 && hold(c, &publish, &unpublish, &pub, n_hold, store) < 0) {
        return 1;
    }

    double *lat = calloc((size_t)cycles, sizeof(double));
    if (lat == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    unsigned before = mount_count();
    for (int i = 0; i < cycles; i++) {
        ProtobufCMessage *m;
        double t0 = now_us();
        if (dfc_rpc_unary(c, &publish, &pub.base, 10000, &m, &err) < 0) {
            fprintf(stderr, "publish: %s\n", dfc_error_msg(&err));
            free(lat);
            return 1;
        }
        dfc_rpc_msg_free(m);
        if (dfc_rpc_unary(c, &unpublish, &unpub.base, 10000, &m, &err) < 0) {
            fprintf(stderr, "unpublish: %s\n", dfc_error_msg(&err));
            free(lat);
            return 1;
        }
        dfc_rpc_msg_free(m);
        lat[i] = now_us() - t0;
    }
    unsigned after = mount_count();
    qsort(lat, (size_t)cycles, sizeof(double), cmp);
    printf("csi bench: %d publish+unpublish cycles (%s)\n", cycles,
           content ? "a content volume: pin, read-only bind, release"
                   : "read-only bind of the socket dir");
    printf("  p50 %.2f ms   p99 %.2f ms   max %.2f ms   (goal p99 <= %d ms)\n",
           lat[cycles / 2] / 1000, lat[cycles * 99 / 100] / 1000, lat[cycles - 1] / 1000,
           content ? 20 : 10);
    printf("  mounts in the table: %u before, %u after\n", before, after);
    free(lat);
    dfc_rpc_client_free(c);
    return after == before ? 0 : 1;
}

/*
 * csi_cycle.c - latency of a NodePublishVolume + NodeUnpublishVolume cycle against a running
 * csi-plugin, over its real socket, with real bind mounts. Prints p50/p99/max over N cycles
 * and the mount table's size before and after (it must not grow).
 *
 *   usage: bench_csi_cycle CSI_SOCKET TARGET_PATH [cycles]
 * Run it in the same (private) mount namespace as the plugin: hack/bench/csi.sh does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CSI_SOCKET TARGET_PATH [cycles]\n", argv[0]);
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
    printf("csi bench: %d publish+unpublish cycles (read-only bind of the socket dir)\n", cycles);
    printf("  p50 %.2f ms   p99 %.2f ms   max %.2f ms   (goal p99 <= 10 ms)\n",
           lat[cycles / 2] / 1000, lat[cycles * 99 / 100] / 1000, lat[cycles - 1] / 1000);
    printf("  mounts in the table: %u before, %u after\n", before, after);
    free(lat);
    dfc_rpc_client_free(c);
    return after == before ? 0 : 1;
}

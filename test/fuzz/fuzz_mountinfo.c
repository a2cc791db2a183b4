/*
 * Fuzz target: the mountinfo scanners (by path, by mount ids) and the octal unescaping, on
 * arbitrary tables.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mount.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char out[64];
    (void)csi_mountinfo_unescape((const char *)data, size, out, sizeof(out));
    FILE *f = fmemopen((void *)data, size, "r");
    if (f == NULL) {
        return 0;
    }
    struct csi_mount_state st;
    static const char *const paths[] = {"/", "/a b", "/var/lib/kubelet/pods/x/mount", ""};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        rewind(f);
        (void)csi_mountinfo_scan(f, paths[i], &st);
    }
    rewind(f);
    (void)csi_mountinfo_stack(f, 416, 28, &st);
    fclose(f);
    return 0;
}

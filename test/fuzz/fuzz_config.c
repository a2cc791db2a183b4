/*
 * Fuzz target: the YAML config loader over a schema with a row of every type. Any input must
 * either load or fail with a message; then the config prints and frees cleanly.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dfc/config.h"

struct cfg {
    char *s, *p;
    bool b;
    int64_t i, d;
    uint64_t u, z;
    uint32_t m;
};

static const struct dfc_config_row rows[] = {
    {"a.string", DFC_CFG_STRING, offsetof(struct cfg, s), "x", NULL, NULL},
    {"a.path", DFC_CFG_PATH, offsetof(struct cfg, p), "/x", NULL, NULL},
    {"a.b.bool", DFC_CFG_BOOL, offsetof(struct cfg, b), "true", NULL, NULL},
    {"a.b.int", DFC_CFG_INT, offsetof(struct cfg, i), "-1", NULL, NULL},
    {"c.uint", DFC_CFG_UINT, offsetof(struct cfg, u), "1", NULL, NULL},
    {"c.size", DFC_CFG_SIZE, offsetof(struct cfg, z), "4MiB", NULL, NULL},
    {"c.duration", DFC_CFG_DURATION, offsetof(struct cfg, d), "1h", NULL, NULL},
    {"c.mode", DFC_CFG_MODE, offsetof(struct cfg, m), "0644", NULL, NULL},
};
static const struct dfc_config_schema schema = {"fuzz", rows, sizeof(rows) / sizeof(rows[0])};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct cfg c;
    struct dfc_error err;
    memset(&c, 0, sizeof(c));
    if (dfc_config_defaults(&schema, &c, &err) < 0) {
        __builtin_trap();
    }
    if (dfc_config_load_string(&schema, &c, "fuzz.yaml", (const char *)data, size, &err) < 0 &&
        err.msg[0] == '\0') {
        __builtin_trap(); /* every failure says why */
    }
    FILE *out = fopen("/dev/null", "w");
    dfc_config_print(&schema, &c, out);
    fclose(out);
    dfc_config_free(&schema, &c);
    return 0;
}

/*
 * Fuzz target: the YAML config loader over a schema with a row of every type (with ranges,
 * choices, a non-empty string). Any input must either load or fail with a message; then the
 * config prints and frees cleanly.
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
    const char *e;
};

static const char *const choices[] = {"one", "two", NULL};

#define F(member) offsetof(struct cfg, member)

static const struct dfc_config_row rows[] = {
    {.key = "a.string",
     .type = DFC_CFG_STRING,
     .offset = F(s),
     .def = "x",
     .flags = DFC_OPT_NONEMPTY},
    {.key = "a.path", .type = DFC_CFG_PATH, .offset = F(p), .def = "/x"},
    {.key = "a.b.bool", .type = DFC_CFG_BOOL, .offset = F(b), .def = "true"},
    {.key = "a.b.int", .type = DFC_CFG_INT, .offset = F(i), .def = "-1", DFC_OPT_RANGE(-9, 9)},
    {.key = "c.uint", .type = DFC_CFG_UINT, .offset = F(u), .def = "1"},
    {.key = "c.size",
     .type = DFC_CFG_SIZE,
     .offset = F(z),
     .def = "4MiB",
     DFC_OPT_RANGE(1, 1 << 30)},
    {.key = "c.duration", .type = DFC_CFG_DURATION, .offset = F(d), .def = "1h", DFC_OPT_POSITIVE},
    {.key = "c.mode", .type = DFC_CFG_MODE, .offset = F(m), .def = "0644"},
    {.key = "c.enum", .type = DFC_CFG_ENUM, .offset = F(e), .def = "one", .choices = choices},
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

/*
 * content.c - content volume attributes, allow rules and pin ids (content.h).
 */
#include "content.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "dfc/digest.h"

#define CSI_PIN_INPUT_MAX (PATH_MAX + 256)

bool csi_content_task_id_valid(const char *id) {
    size_t n = 0;
    for (; id[n] != '\0'; n++) {
        if (n >= CSI_CONTENT_TASK_ID_LEN ||
            !((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'a' && id[n] <= 'f'))) {
            return false;
        }
    }
    return n == CSI_CONTENT_TASK_ID_LEN;
}

/* Checks one file name (len bytes at name) and copies it to out. attr names the attribute. */
static int take_name(const char *name, size_t len, const char *attr, char out[NAME_MAX + 1],
                     struct dfc_error *err) {
    if (len == 0) {
        return dfc_error_set(err, -EINVAL, "%s: a file name is empty", attr);
    }
    if (len > NAME_MAX) {
        return dfc_error_set(err, -EINVAL, "%s: file name `%.32s...` is longer than %d bytes", attr,
                             name, NAME_MAX);
    }
    if (memchr(name, '/', len) != NULL) {
        return dfc_error_set(err, -EINVAL, "%s: file name `%.*s` must not contain '/'", attr,
                             (int)len, name);
    }
    if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) {
        return dfc_error_set(err, -EINVAL, "%s: file name `%.*s` is not allowed", attr, (int)len,
                             name);
    }
    memcpy(out, name, len);
    out[len] = '\0';
    return 0;
}

static int take_id(const char *id, size_t len, const char *attr, char out[65],
                   struct dfc_error *err) {
    char buf[CSI_CONTENT_TASK_ID_LEN + 1];
    if (len == CSI_CONTENT_TASK_ID_LEN) {
        memcpy(buf, id, len);
        buf[len] = '\0';
    }
    if (len != CSI_CONTENT_TASK_ID_LEN || !csi_content_task_id_valid(buf)) {
        return dfc_error_set(err, -EINVAL,
                             "%s: task id `%.*s` is not 64 lowercase hexadecimal digits", attr,
                             (int)(len > 80 ? 80 : len), id);
    }
    memcpy(out, buf, len + 1);
    return 0;
}

static bool blank(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int parse_files(const char *files, struct csi_content_spec *ret, struct dfc_error *err) {
    const char *attr = CSI_CONTENT_KEY_FILES;
    const char *p = files;
    for (;;) {
        const char *end = strchr(p, ',');
        if (end == NULL) {
            end = p + strlen(p);
        }
        const char *a = p, *b = end;
        while (a < b && blank(*a)) {
            a++;
        }
        while (b > a && blank(b[-1])) {
            b--;
        }
        if (ret->n == CSI_CONTENT_MAX_FILES) {
            return dfc_error_set(err, -EINVAL, "%s: more than %d files", attr,
                                 CSI_CONTENT_MAX_FILES);
        }
        const char *eq = memchr(a, '=', (size_t)(b - a));
        if (eq == NULL) {
            return dfc_error_set(err, -EINVAL, "%s: entry %zu `%.*s` is not name=taskID", attr,
                                 ret->n + 1, (int)(b - a > 80 ? 80 : b - a), a);
        }
        struct csi_content_file *f = &ret->files[ret->n];
        int r = take_name(a, (size_t)(eq - a), attr, f->name, err);
        if (r == 0) {
            r = take_id(eq + 1, (size_t)(b - eq - 1), attr, f->task_id, err);
        }
        if (r < 0) {
            return r;
        }
        for (size_t i = 0; i < ret->n; i++) {
            if (strcmp(ret->files[i].name, f->name) == 0) {
                return dfc_error_set(err, -EINVAL, "%s: file name `%s` is given twice", attr,
                                     f->name);
            }
        }
        ret->n++;
        if (*end == '\0') {
            return 0;
        }
        p = end + 1;
    }
}

int csi_content_parse(const char *task_id, const char *file_name, const char *files,
                      struct csi_content_spec *ret, struct dfc_error *err) {
    ret->n = 0;
    if (task_id == NULL && files == NULL) {
        if (file_name != NULL) {
            return dfc_error_set(err, -EINVAL, "%s is given without %s", CSI_CONTENT_KEY_FILE_NAME,
                                 CSI_CONTENT_KEY_TASK_ID);
        }
        return 0;
    }
    if (task_id != NULL && files != NULL) {
        return dfc_error_set(err, -EINVAL, "%s and %s are both given: use one",
                             CSI_CONTENT_KEY_TASK_ID, CSI_CONTENT_KEY_FILES);
    }
    int r;
    if (files != NULL) {
        if (file_name != NULL) {
            return dfc_error_set(err, -EINVAL, "%s is given with %s (name each file there)",
                                 CSI_CONTENT_KEY_FILE_NAME, CSI_CONTENT_KEY_FILES);
        }
        r = parse_files(files, ret, err);
    } else {
        const char *name = file_name != NULL ? file_name : CSI_CONTENT_DEFAULT_NAME;
        r = take_name(name, strlen(name), CSI_CONTENT_KEY_FILE_NAME, ret->files[0].name, err);
        if (r == 0) {
            r = take_id(task_id, strlen(task_id), CSI_CONTENT_KEY_TASK_ID, ret->files[0].task_id,
                        err);
        }
        ret->n = r == 0 ? 1 : 0;
    }
    if (r < 0) {
        ret->n = 0;
        return r;
    }
    return 1;
}

int csi_content_rules_check(const struct csi_content_rules *rules, struct dfc_error *err) {
    for (size_t i = 0; i < rules->n; i++) {
        const char *rule = rules->items[i];
        const char *slash = strchr(rule, '/');
        if (rule[0] == '\0' || slash == rule || (slash != NULL && slash[1] == '\0') ||
            (slash != NULL && strchr(slash + 1, '/') != NULL)) {
            return dfc_error_set(err, -EINVAL,
                                 "content allow rule `%s` must be NAMESPACE or "
                                 "NAMESPACE/SERVICEACCOUNT (shell globs)",
                                 rule);
        }
    }
    return 0;
}

/* True when rule admits the pair. */
static bool admits(const char *rule, const char *ns, const char *sa) {
    char ns_glob[256];
    const char *slash = strchr(rule, '/');
    size_t n = slash != NULL ? (size_t)(slash - rule) : strlen(rule);
    if (n >= sizeof(ns_glob)) {
        return false;
    }
    memcpy(ns_glob, rule, n);
    ns_glob[n] = '\0';
    if (fnmatch(ns_glob, ns, 0) != 0) {
        return false;
    }
    return slash == NULL || fnmatch(slash + 1, sa, 0) == 0;
}

int csi_content_authorize(const struct csi_content_rules *rules, const char *namespace_,
                          const char *service_account, struct dfc_error *err) {
    if (rules->n == 0) {
        return 0;
    }
    if (namespace_ == NULL || namespace_[0] == '\0') {
        return dfc_error_set(err, -EACCES,
                             "content volumes are limited by allow rules, and this request "
                             "names no pod namespace (%s): the CSIDriver needs podInfoOnMount: "
                             "true",
                             CSI_POD_NAMESPACE_KEY);
    }
    const char *sa = service_account != NULL ? service_account : "";
    for (size_t i = 0; i < rules->n; i++) {
        if (admits(rules->items[i], namespace_, sa)) {
            return 0;
        }
    }
    char list[512] = "";
    size_t o = 0;
    for (size_t i = 0; i < rules->n && o < sizeof(list); i++) {
        int k = snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", rules->items[i]);
        o += k > 0 ? (size_t)k : 0;
    }
    return dfc_error_set(err, -EACCES,
                         "no content allow rule admits namespace `%s` service account `%s` "
                         "(--content-allow: %s)",
                         namespace_, sa, list);
}

void csi_content_pin_id(const char *volume_id, const char *target_path,
                        char out[CSI_CONTENT_PIN_ID_LEN + 1]) {
    /* Both are bounded by the callers (128 bytes, PATH_MAX), so the pair fits. */
    char buf[CSI_PIN_INPUT_MAX], hex[DFC_SHA256_HEX_LEN + 1];
    int n = snprintf(buf, sizeof(buf), "%s%c%s", volume_id, '\0', target_path);
    size_t len = n < 0 ? 0 : (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
    dfc_sha256_hex(buf, len, hex);
    snprintf(out, CSI_CONTENT_PIN_ID_LEN + 1, "cv-%.40s", hex);
}

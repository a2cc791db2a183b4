/*
 * content.h - content volumes as a publish request describes them: which tasks, under which
 * file names (the volume context's attributes), and who may mount them (the allow rules and the
 * pod identity kubelet passes with podInfoOnMount). Pure: no I/O, no syscalls
 * (docs/content-volumes.md).
 *
 * A volume context with `taskID` (and optionally `fileName`, default "content") or `files`
 * ("name=taskID,name=taskID,...") is a content volume; one with neither is a socket volume.
 *
 * Ownership: struct csi_content_spec holds copies; nothing is borrowed past a call.
 */
#ifndef CSI_CONTENT_H
#define CSI_CONTENT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "dfc/error.h"

#define CSI_CONTENT_MAX_FILES     64
#define CSI_CONTENT_TASK_ID_LEN   64
#define CSI_CONTENT_DEFAULT_NAME  "content"
#define CSI_CONTENT_KEY_TASK_ID   "taskID"
#define CSI_CONTENT_KEY_FILE_NAME "fileName"
#define CSI_CONTENT_KEY_FILES     "files"

/* The pod identity keys of podInfoOnMount. */
#define CSI_POD_NAMESPACE_KEY       "csi.storage.k8s.io/pod.namespace"
#define CSI_POD_NAME_KEY            "csi.storage.k8s.io/pod.name"
#define CSI_POD_SERVICE_ACCOUNT_KEY "csi.storage.k8s.io/serviceAccount.name"

struct csi_content_file {
    char name[NAME_MAX + 1];
    char task_id[CSI_CONTENT_TASK_ID_LEN + 1];
};

struct csi_content_spec {
    size_t n;
    struct csi_content_file files[CSI_CONTENT_MAX_FILES];
};

/* Reads the three attributes (NULL: absent). Returns 0 for a socket volume (none of them),
 * 1 with *ret filled for a content volume, or -EINVAL with err naming the attribute: a task id
 * that is not 64 lowercase hex digits; a file name that is empty, "." or "..", holds '/' or is
 * longer than NAME_MAX; two files of one name; more than CSI_CONTENT_MAX_FILES files; both
 * taskID and files; fileName without taskID. In `files`, blanks around an entry are dropped. */
int csi_content_parse(const char *task_id, const char *file_name, const char *files,
                      struct csi_content_spec *ret, struct dfc_error *err);

/* True for 64 lowercase hex digits. */
bool csi_content_task_id_valid(const char *id);

/* The allow rules: each "NAMESPACE[/SERVICEACCOUNT]", both shell globs (fnmatch), the service
 * account "*" when left out. No rules: everyone who may mount the driver. */
struct csi_content_rules {
    size_t n;
    char *const *items; /* borrowed (the configuration's) */
};

/* Checks the rules' syntax: -EINVAL naming the rule (empty, an empty part, more than one '/'). */
int csi_content_rules_check(const struct csi_content_rules *rules, struct dfc_error *err);

/* 0 when a rule admits the pod (namespace, service_account: NULL when kubelet sent none), or
 * -EACCES with err naming the namespace, the service account and the rules. With rules and no
 * namespace, -EACCES saying that podInfoOnMount must be on. */
int csi_content_authorize(const struct csi_content_rules *rules, const char *namespace_,
                          const char *service_account, struct dfc_error *err);

/* The pin id of one publication: "cv-" + 40 hex of SHA-256(volume_id NUL target_path). */
#define CSI_CONTENT_PIN_ID_LEN 43
void csi_content_pin_id(const char *volume_id, const char *target_path,
                        char out[CSI_CONTENT_PIN_ID_LEN + 1]);

#endif /* CSI_CONTENT_H */

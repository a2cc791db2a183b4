/*
 * controller.c - a minimal CSI Controller, enough for dynamic provisioning through
 * external-provisioner: CreateVolume, DeleteVolume, ValidateVolumeCapabilities and
 * ControllerGetCapabilities; every other Controller RPC is answered UNIMPLEMENTED by the RPC
 * layer, since the table does not declare it.
 *
 * A volume holds no data (every volume of this driver is a view of the node's dfdaemon socket
 * directory), so CreateVolume only records name -> requested capacity, one small file per
 * volume under the state dir, written atomically; the record exists so that the same name with
 * another capacity is refused (ALREADY_EXISTS) and a deleted or foreign id is NOT_FOUND.
 *
 * A StorageClass whose parameters name tasks (taskID, fileName, files: content.h) makes content
 * volumes: the parameters are checked here (INVALID_ARGUMENT naming the attribute) and handed
 * on in the volume's context, where NodePublishVolume finds them.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "content.h"
#include "csi/csi.pb-c.h"
#include "dfc/id.h"
#include "dfc/units.h"
#include "driver.h"
#include "driver_internal.h"

static void record_path(const struct csi_driver *d, const char *id, char *buf, size_t size) {
    snprintf(buf, size, "%s/%s", d->cfg.state_dir, id);
}

/* Reads a record: 1 with *ret_capacity set, 0 when there is none. */
static int read_record(const struct csi_driver *d, const char *id, int64_t *ret_capacity,
                       struct dfc_error *err) {
    char path[PATH_MAX], line[64];
    record_path(d, id, path, sizeof(path));
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return errno == ENOENT ? 0 : dfc_error_errno(err, -errno, "read `%s`", path);
    }
    int64_t cap = -1;
    if (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "capacity=", 9) != 0 || dfc_parse_i64(line + 9, &cap) < 0) {
            cap = -1;
        }
    }
    fclose(f);
    if (cap < 0) {
        return dfc_error_set(err, DFC_E_INTERNAL, "the record of volume %s is corrupt", id);
    }
    *ret_capacity = cap;
    return 1;
}

static int write_record(const struct csi_driver *d, const char *id, const char *name,
                        int64_t capacity, struct dfc_error *err) {
    char path[PATH_MAX], tmp[PATH_MAX + 64], uuid[DFC_UUID_STR_LEN + 1];
    record_path(d, id, path, sizeof(path));
    dfc_uuid_v4(uuid);
    snprintf(tmp, sizeof(tmp), "%s/.tmp-%s", d->cfg.state_dir, uuid);
    FILE *f = fopen(tmp, "wxe");
    if (f == NULL) {
        return dfc_error_errno(err, -errno, "create `%s`", tmp);
    }
    fprintf(f, "capacity=%" PRId64 "\nname=%s\n", capacity, name);
    int r = fflush(f) == 0 && fsync(fileno(f)) == 0 ? 0 : -errno;
    fclose(f);
    if (r == 0 && rename(tmp, path) < 0) {
        r = -errno;
    }
    if (r < 0) {
        (void)unlink(tmp);
        return dfc_error_errno(err, r, "write the record of volume %s", id);
    }
    return 0;
}

static int check_capabilities(Csi__V1__VolumeCapability *const *caps, size_t n,
                              struct dfc_error *err) {
    if (n == 0) {
        return dfc_error_set(err, -EINVAL, "volume_capabilities is required");
    }
    for (size_t i = 0; i < n; i++) {
        char field[48];
        snprintf(field, sizeof(field), "volume_capabilities[%zu]", i);
        int r = csi__check_capability(caps[i], field, err);
        if (r < 0) {
            return r;
        }
    }
    return 0;
}

/* Checks a content StorageClass's parameters and copies them into the volume's context. */
static int content_context(struct dfc_rpc_call *call, const Csi__V1__CreateVolumeRequest *req,
                           Csi__V1__Volume *vol, struct dfc_error *err) {
    static const char *const keys[] = {CSI_CONTENT_KEY_TASK_ID, CSI_CONTENT_KEY_FILE_NAME,
                                       CSI_CONTENT_KEY_FILES};
    const char *values[3] = {NULL, NULL, NULL};
    size_t n = 0;
    for (size_t i = 0; i < req->n_parameters; i++) {
        for (size_t k = 0; k < 3; k++) {
            if (strcmp(req->parameters[i]->key, keys[k]) == 0) {
                n += values[k] == NULL;
                values[k] = req->parameters[i]->value;
            }
        }
    }
    if (n == 0) {
        return 0; /* a socket volume: every other parameter is ignored, as before */
    }
    struct csi_content_spec *spec = malloc(sizeof(*spec));
    if (spec == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    int r = csi_content_parse(values[0], values[1], values[2], spec, err);
    free(spec);
    if (r < 0) {
        return dfc_error_prefix(err, "parameters");
    }
    vol->volume_context =
        dfc_rpc_call_alloc(call, n * sizeof(Csi__V1__Volume__VolumeContextEntry *));
    if (vol->volume_context == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    for (size_t k = 0; k < 3; k++) {
        if (values[k] == NULL) {
            continue;
        }
        Csi__V1__Volume__VolumeContextEntry *e =
            (Csi__V1__Volume__VolumeContextEntry *)dfc_rpc_call_new_msg(
                call, &csi__v1__volume__volume_context_entry__descriptor);
        if (e == NULL) {
            return dfc_error_set(err, -ENOMEM, "out of memory");
        }
        e->key = (char *)keys[k];
        e->value = (char *)values[k]; /* the request outlives the response's packing */
        vol->volume_context[vol->n_volume_context++] = e;
    }
    return 0;
}

static int create_volume(void *drv, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                         ProtobufCMessage *resp_, struct dfc_error *err) {
    struct csi_driver *d = drv;
    const Csi__V1__CreateVolumeRequest *req = (const void *)req_;
    Csi__V1__CreateVolumeResponse *resp = (void *)resp_;
    dfc_rpc_call_log_field(call, "name", req->name);
    if (req->name[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "name is required");
    }
    if (strlen(req->name) > CSI_STRING_MAX) {
        return dfc_error_set(err, -EINVAL, "name is longer than %d bytes", CSI_STRING_MAX);
    }
    int r = check_capabilities(req->volume_capabilities, req->n_volume_capabilities, err);
    if (r < 0) {
        return r;
    }
    if (req->volume_content_source != NULL) {
        return dfc_error_set(err, -EINVAL,
                             "volume_content_source is not supported: volumes hold no data");
    }
    Csi__V1__Volume content = CSI__V1__VOLUME__INIT; /* only its context, in the call's arena */
    if ((r = content_context(call, req, &content, err)) < 0) {
        return r;
    }
    int64_t want = 0;
    if (req->capacity_range != NULL) {
        int64_t lo = req->capacity_range->required_bytes, hi = req->capacity_range->limit_bytes;
        if (lo < 0 || hi < 0 || (hi > 0 && lo > hi)) {
            return dfc_error_set(err, -ERANGE,
                                 "capacity_range: required_bytes %" PRId64
                                 " and limit_bytes %" PRId64 " do not make a range",
                                 lo, hi);
        }
        want = lo;
    }
    char id[CSI_VOLUME_ID_LEN + 1];
    csi_volume_id(req->name, id);
    dfc_rpc_call_log_field(call, "volume_id", id);
    int64_t have;
    pthread_mutex_lock(&d->records_mu);
    r = read_record(d, id, &have, err);
    if (r == 1 && have != want) {
        r = dfc_error_set(err, -EEXIST,
                          "a volume named `%s` exists with capacity %" PRId64 ", not %" PRId64,
                          req->name, have, want);
    } else if (r == 0) {
        r = write_record(d, id, req->name, want, err);
    }
    pthread_mutex_unlock(&d->records_mu);
    if (r < 0) {
        return r;
    }
    resp->volume = (Csi__V1__Volume *)dfc_rpc_call_new_msg(call, &csi__v1__volume__descriptor);
    if (resp->volume == NULL || (resp->volume->volume_id = dfc_rpc_call_strdup(call, id)) == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    resp->volume->capacity_bytes = want;
    resp->volume->n_volume_context = content.n_volume_context;
    resp->volume->volume_context = content.volume_context;
    return 0;
}

static int delete_volume(void *drv, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                         ProtobufCMessage *resp_, struct dfc_error *err) {
    struct csi_driver *d = drv;
    const Csi__V1__DeleteVolumeRequest *req = (const void *)req_;
    dfc_rpc_call_log_field(call, "volume_id", req->volume_id);
    if (req->volume_id[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "volume_id is required");
    }
    if (!csi_volume_id_valid(req->volume_id)) {
        return 0; /* never ours, so nothing to delete: OK, as the spec asks */
    }
    char path[PATH_MAX];
    record_path(d, req->volume_id, path, sizeof(path));
    pthread_mutex_lock(&d->records_mu);
    int r = unlink(path) < 0 && errno != ENOENT ? -errno : 0;
    pthread_mutex_unlock(&d->records_mu);
    return r < 0 ? dfc_error_errno(err, r, "delete the record of volume %s", req->volume_id) : 0;
}

static int validate_capabilities(void *drv, struct dfc_rpc_call *call, const ProtobufCMessage *req_,
                                 ProtobufCMessage *resp_, struct dfc_error *err) {
    struct csi_driver *d = drv;
    const Csi__V1__ValidateVolumeCapabilitiesRequest *req = (const void *)req_;
    Csi__V1__ValidateVolumeCapabilitiesResponse *resp = (void *)resp_;
    dfc_rpc_call_log_field(call, "volume_id", req->volume_id);
    if (req->volume_id[0] == '\0') {
        return dfc_error_set(err, -EINVAL, "volume_id is required");
    }
    if (req->n_volume_capabilities == 0) {
        return dfc_error_set(err, -EINVAL, "volume_capabilities is required");
    }
    int64_t have;
    int r = csi_volume_id_valid(req->volume_id) ? read_record(d, req->volume_id, &have, err) : 0;
    if (r < 0) {
        return r;
    }
    if (r == 0) {
        return dfc_error_set(err, -ENOENT, "volume %s does not exist", req->volume_id);
    }
    /* Confirm only when every capability is one this driver serves. */
    struct dfc_error why;
    if (check_capabilities(req->volume_capabilities, req->n_volume_capabilities, &why) < 0) {
        resp->message = dfc_rpc_call_strdup(call, why.msg);
        return 0;
    }
    resp->confirmed =
        (Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed *)dfc_rpc_call_new_msg(
            call, &csi__v1__validate_volume_capabilities_response__confirmed__descriptor);
    if (resp->confirmed == NULL) {
        return dfc_error_set(err, -ENOMEM, "out of memory");
    }
    resp->confirmed->n_volume_capabilities = req->n_volume_capabilities;
    resp->confirmed->volume_capabilities = req->volume_capabilities; /* borrowed for the call */
    return 0;
}

static int controller_get_capabilities(void *drv, struct dfc_rpc_call *call,
                                       const ProtobufCMessage *req, ProtobufCMessage *resp_,
                                       struct dfc_error *err) {
    static Csi__V1__ControllerServiceCapability__RPC rpc = {
        PROTOBUF_C_MESSAGE_INIT(&csi__v1__controller_service_capability__rpc__descriptor),
        CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME};
    static Csi__V1__ControllerServiceCapability cap = {
        PROTOBUF_C_MESSAGE_INIT(&csi__v1__controller_service_capability__descriptor),
        CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC,
        {.rpc = &rpc}};
    static Csi__V1__ControllerServiceCapability *caps[] = {&cap};
    Csi__V1__ControllerGetCapabilitiesResponse *resp = (void *)resp_;
    resp->n_capabilities = 1;
    resp->capabilities = caps;
    return 0;
}

const struct dfc_rpc_method csi__controller_methods[] = {
    DFC_RPC_METHOD("CreateVolume", DFC_RPC_UNARY, csi__v1__create_volume_request,
                   csi__v1__create_volume_response, create_volume),
    DFC_RPC_METHOD("DeleteVolume", DFC_RPC_UNARY, csi__v1__delete_volume_request,
                   csi__v1__delete_volume_response, delete_volume),
    DFC_RPC_METHOD("ValidateVolumeCapabilities", DFC_RPC_UNARY,
                   csi__v1__validate_volume_capabilities_request,
                   csi__v1__validate_volume_capabilities_response, validate_capabilities),
    DFC_RPC_METHOD("ControllerGetCapabilities", DFC_RPC_UNARY,
                   csi__v1__controller_get_capabilities_request,
                   csi__v1__controller_get_capabilities_response, controller_get_capabilities),
};
const size_t csi__n_controller_methods = DFC_RPC_N(csi__controller_methods);

/*
 * Wire-encoding checks for the project's own .proto files: each case builds a message with
 * protobuf-c and compares its bytes with an encoding derived by hand from the public field
 * numbers and wire types, then decodes those bytes back. A wrong field number, type or a
 * proto3 optional that lost its presence fails here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csi/csi.pb-c.h"
#include "dragonfly/common.pb-c.h"
#include "dragonfly/dfdaemon.pb-c.h"
#include "dragonfly/scheduler.pb-c.h"

static void expect_bytes(const ProtobufCMessage *m, const unsigned char *want, size_t n) {
    size_t len = protobuf_c_message_get_packed_size(m);
    unsigned char *buf = malloc(len ? len : 1);
    assert_int_equal(protobuf_c_message_pack(m, buf), len);
    if (len != n || memcmp(buf, want, n) != 0) {
        for (size_t i = 0; i < len; i++) {
            fprintf(stderr, "%02x ", buf[i]);
        }
        fprintf(stderr, "\n");
    }
    assert_int_equal(len, n);
    assert_memory_equal(buf, want, n);
    free(buf);
}

static void test_upload_request(void **state) {
    Dfdaemon__V2__UploadPersistentCacheTaskRequest r =
        DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__INIT;
    Google__Protobuf__Duration ttl = GOOGLE__PROTOBUF__DURATION__INIT;
    ttl.seconds = 3600;
    r.path = "/a";
    r.persistent_replica_count = 2;
    r.opt_tag_case = DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_TAG_TAG;
    r.tag = ""; /* present but empty: optional keeps it on the wire */
    r.opt_piece_length_case =
        DFDAEMON__V2__UPLOAD_PERSISTENT_CACHE_TASK_REQUEST__OPT_PIECE_LENGTH_PIECE_LENGTH;
    r.piece_length = 4194304;
    r.ttl = &ttl;
    static const unsigned char want[] = {
        0x12, 0x02, '/',  'a',        /* 2 path */
        0x18, 0x02,                   /* 3 persistent_replica_count */
        0x22, 0x00,                   /* 4 tag = "" */
        0x30, 0x80, 0x80, 0x80, 0x02, /* 6 piece_length = 2^22 */
        0x3a, 0x03, 0x08, 0x90, 0x1c, /* 7 ttl { 1 seconds = 3600 } */
    };
    expect_bytes(&r.base, want, sizeof(want));

    Dfdaemon__V2__UploadPersistentCacheTaskRequest *d =
        dfdaemon__v2__upload_persistent_cache_task_request__unpack(NULL, sizeof(want), want);
    assert_non_null(d);
    assert_string_equal(d->path, "/a");
    assert_int_equal(d->opt_tag_case, 4);
    assert_string_equal(d->tag, "");
    assert_int_equal(d->opt_application_case, 0); /* absent stays absent */
    assert_int_equal(d->opt_content_for_calculating_task_id_case, 0);
    assert_true(d->piece_length == 4194304);
    assert_true(d->ttl->seconds == 3600);
    dfdaemon__v2__upload_persistent_cache_task_request__free_unpacked(d, NULL);
}

static void test_piece(void **state) {
    Common__V2__Piece p = COMMON__V2__PIECE__INIT;
    p.number = 3;
    p.opt_parent_id_case = COMMON__V2__PIECE__OPT_PARENT_ID_PARENT_ID;
    p.parent_id = "p";
    p.offset = 8388608;
    p.length = 5;
    p.digest = "crc32:1";
    p.opt_content_case = COMMON__V2__PIECE__OPT_CONTENT_CONTENT;
    p.content.data = (uint8_t *)"ab";
    p.content.len = 2;
    p.opt_traffic_type_case = COMMON__V2__PIECE__OPT_TRAFFIC_TYPE_TRAFFIC_TYPE;
    p.traffic_type = COMMON__V2__TRAFFIC_TYPE__LOCAL_PEER;
    static const unsigned char want[] = {
        0x08, 0x03,                                       /* 1 number */
        0x12, 0x01, 'p',                                  /* 2 parent_id */
        0x18, 0x80, 0x80, 0x80, 0x04,                     /* 3 offset = 2^23 */
        0x20, 0x05,                                       /* 4 length */
        0x2a, 0x07, 'c',  'r',  'c',  '3', '2', ':', '1', /* 5 digest */
        0x32, 0x02, 'a',  'b',                            /* 6 content */
        0x38, 0x02,                                       /* 7 traffic_type = LOCAL_PEER */
    };
    expect_bytes(&p.base, want, sizeof(want));
}

static void test_download_response_oneof(void **state) {
    Dfdaemon__V2__DownloadPersistentCacheTaskResponse r =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__INIT;
    Dfdaemon__V2__DownloadPersistentCacheTaskStartedResponse s =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_STARTED_RESPONSE__INIT;
    s.content_length = 1;
    r.host_id = "h";
    r.task_id = "t";
    r.response_case =
        DFDAEMON__V2__DOWNLOAD_PERSISTENT_CACHE_TASK_RESPONSE__RESPONSE_DOWNLOAD_PERSISTENT_CACHE_TASK_STARTED_RESPONSE;
    r.download_persistent_cache_task_started_response = &s;
    static const unsigned char want[] = {
        0x0a, 0x01, 'h',  0x12, 0x01, 't', /* 1 host_id, 2 task_id; 3 peer_id "" omitted */
        0x22, 0x02, 0x08, 0x01,            /* 4 started { 1 content_length = 1 } */
    };
    expect_bytes(&r.base, want, sizeof(want));
}

static void test_announce_host(void **state) {
    Scheduler__V2__AnnounceHostRequest r = SCHEDULER__V2__ANNOUNCE_HOST_REQUEST__INIT;
    Common__V2__Host h = COMMON__V2__HOST__INIT;
    Google__Protobuf__Duration iv = GOOGLE__PROTOBUF__DURATION__INIT;
    h.id = "x";
    h.port = 4000;
    iv.seconds = 300;
    r.host = &h;
    r.interval = &iv;
    static const unsigned char want[] = {
        0x0a, 0x06, 0x0a, 0x01, 'x',  0x28, 0xa0, 0x1f, /* 1 host { 1 id, 5 port = 4000 } */
        0x12, 0x03, 0x08, 0xac, 0x02,                   /* 2 interval { 1 seconds = 300 } */
    };
    expect_bytes(&r.base, want, sizeof(want));
}

static void test_announce_peer_piece_failed(void **state) {
    Scheduler__V2__AnnouncePersistentCachePeerRequest r =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__INIT;
    Scheduler__V2__DownloadPieceFailedRequest f =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__INIT;
    f.opt_piece_number_case =
        SCHEDULER__V2__DOWNLOAD_PIECE_FAILED_REQUEST__OPT_PIECE_NUMBER_PIECE_NUMBER;
    f.piece_number = 0; /* present zero: still encoded */
    f.parent_id = "p";
    f.temporary = 1;
    r.host_id = "h";
    r.request_case =
        SCHEDULER__V2__ANNOUNCE_PERSISTENT_CACHE_PEER_REQUEST__REQUEST_DOWNLOAD_PIECE_FAILED_REQUEST;
    r.download_piece_failed_request = &f;
    static const unsigned char want[] = {
        0x0a, 0x01, 'h',                                     /* 1 host_id */
        0x52, 0x07, 0x08, 0x00, 0x12, 0x01, 'p', 0x18, 0x01, /* 10 { 1 = 0, 2 "p", 3 true } */
    };
    expect_bytes(&r.base, want, sizeof(want));
}

static void test_csi_node_publish(void **state) {
    Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
    Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
    Csi__V1__VolumeCapability__MountVolume mount = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
    Csi__V1__VolumeCapability__AccessMode mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
    mode.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
    cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
    cap.mount = &mount;
    cap.access_mode = &mode;
    r.volume_id = "v";
    r.target_path = "/t";
    r.volume_capability = &cap;
    r.readonly = 1;
    static const unsigned char want[] = {
        0x0a, 0x01, 'v',                                /* 1 volume_id */
        0x22, 0x02, '/',  't',                          /* 4 target_path */
        0x2a, 0x06, 0x12, 0x00, 0x1a, 0x02, 0x08, 0x01, /* 5 { 2 mount {}, 3 { 1 = 1 } } */
        0x30, 0x01,                                     /* 6 readonly */
    };
    expect_bytes(&r.base, want, sizeof(want));

    Csi__V1__ProbeResponse p = CSI__V1__PROBE_RESPONSE__INIT;
    Google__Protobuf__BoolValue ready = GOOGLE__PROTOBUF__BOOL_VALUE__INIT;
    ready.value = 1;
    p.ready = &ready;
    static const unsigned char want_probe[] = {0x0a, 0x02, 0x08, 0x01};
    expect_bytes(&p.base, want_probe, sizeof(want_probe));
}

static void test_unknown_fields_are_tolerated(void **state) {
    /* A newer peer may add fields: 99 (varint) and 100 (bytes) must be skipped. */
    static const unsigned char in[] = {
        0x08, 0x07,                 /* 1 number = 7 */
        0x98, 0x06, 0x2a,           /* 99 varint = 42 */
        0xa2, 0x06, 0x02, 'z', 'z', /* 100 bytes "zz" */
        0x20, 0x09,                 /* 4 length = 9 */
    };
    Common__V2__Piece *p = common__v2__piece__unpack(NULL, sizeof(in), in);
    assert_non_null(p);
    assert_int_equal(p->number, 7);
    assert_true(p->length == 9);
    assert_int_equal(p->opt_content_case, 0);
    common__v2__piece__free_unpacked(p, NULL);
}

static void test_service_paths(void **state) {
    assert_string_equal(dfdaemon__v2__dfdaemon_download__descriptor.name,
                        "dfdaemon.v2.DfdaemonDownload");
    assert_string_equal(dfdaemon__v2__dfdaemon_upload__descriptor.name,
                        "dfdaemon.v2.DfdaemonUpload");
    assert_string_equal(scheduler__v2__scheduler__descriptor.name, "scheduler.v2.Scheduler");
    assert_string_equal(csi__v1__node__descriptor.name, "csi.v1.Node");
    assert_non_null(protobuf_c_service_descriptor_get_method_by_name(
        &dfdaemon__v2__dfdaemon_download__descriptor, "UploadPersistentCacheTask"));
    assert_non_null(protobuf_c_service_descriptor_get_method_by_name(
        &scheduler__v2__scheduler__descriptor, "AnnouncePersistentCachePeer"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upload_request),
        cmocka_unit_test(test_piece),
        cmocka_unit_test(test_download_response_oneof),
        cmocka_unit_test(test_announce_host),
        cmocka_unit_test(test_announce_peer_piece_failed),
        cmocka_unit_test(test_csi_node_publish),
        cmocka_unit_test(test_unknown_fields_are_tolerated),
        cmocka_unit_test(test_service_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

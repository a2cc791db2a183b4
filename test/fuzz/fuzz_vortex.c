/*
 * Fuzz target: the Vortex decoders (daemon/p2p/vortex.c), fed what a remote peer could send.
 * The input is read as a packet (a 6-byte header, then the value it claims, cut to what is
 * there) and its value is also handed to every decoder whatever the tag says. Whatever decodes
 * must re-encode to the same bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "p2p/vortex.h"

static void check_request(const uint8_t *v, size_t n) {
    char id[DFD_VORTEX_TASK_ID_LEN + 1];
    uint32_t number;
    if (dfd_vortex_request_decode(v, n, id, &number, NULL) == 0) {
        uint8_t out[DFD_VORTEX_REQUEST_PACKET_LEN];
        if (dfd_vortex_request_encode(0, id, number, out, NULL) != 0 ||
            memcmp(out + DFD_VORTEX_HEADER_LEN, v, n) != 0) {
            abort();
        }
    }
}

static void check_content(const uint8_t *v, size_t n) {
    struct dfd_vortex_piece p;
    if (dfd_vortex_content_decode(v, n, &p, NULL) == 0) {
        static uint8_t out[DFD_VORTEX_HEADER_LEN + 4 + DFD_VORTEX_METADATA_MAX];
        size_t len = 0;
        if (dfd_vortex_content_encode(0, &p, out, sizeof(out), &len, NULL) != 0 ||
            len != DFD_VORTEX_HEADER_LEN + n || memcmp(out + DFD_VORTEX_HEADER_LEN, v, n) != 0) {
            abort();
        }
    }
}

static void check_error(const uint8_t *v, size_t n) {
    uint8_t code;
    const char *msg;
    size_t len;
    if (dfd_vortex_error_decode(v, n, &code, &msg, &len, NULL) == 0) {
        /* The message is not NUL-terminated: copy it to encode it again. */
        char *s = malloc(len + 1);
        if (s == NULL) {
            return;
        }
        memcpy(s, msg, len);
        s[len] = '\0';
        static uint8_t out[DFD_VORTEX_HEADER_LEN + 1 + DFD_VORTEX_ERROR_MAX];
        size_t olen = 0;
        if (dfd_vortex_error_encode(0, code, s, out, sizeof(out), &olen, NULL) != 0 ||
            olen > DFD_VORTEX_HEADER_LEN + n) {
            abort();
        }
        free(s);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check_request(data, size);
    check_content(data, size);
    check_error(data, size);
    if (size < DFD_VORTEX_HEADER_LEN) {
        return 0;
    }
    struct dfd_vortex_header h;
    dfd_vortex_header_decode(data, &h);
    const uint8_t *v = data + DFD_VORTEX_HEADER_LEN;
    size_t n = size - DFD_VORTEX_HEADER_LEN;
    if (h.length < n) {
        n = h.length;
    }
    switch (h.tag) {
    case DFD_VORTEX_TAG_DOWNLOAD_PERSISTENT_CACHE_PIECE:
        check_request(v, n);
        break;
    case DFD_VORTEX_TAG_PERSISTENT_CACHE_PIECE_CONTENT:
        check_content(v, n);
        break;
    case DFD_VORTEX_TAG_ERROR:
        check_error(v, n);
        break;
    default:
        break;
    }
    return 0;
}

#!/bin/sh
# Runs a test (argv) in a mount namespace of its own, with private propagation, so nothing it
# mounts is seen outside and the test never changes the namespaces of its own process
# (dfc_integration_test(... PRIVATE_MOUNT_NS) in test/CMakeLists.txt). Not root: runs it as it
# is, and it reports its cases Skipped.
if [ "$(id -u)" -ne 0 ]; then
    exec "$@"
fi
exec unshare --mount --propagation private "$@"

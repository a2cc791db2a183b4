# System libraries, all from Debian 12 packages (hack/install-deps.sh).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(PROTOBUFC REQUIRED IMPORTED_TARGET libprotobuf-c)
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)
pkg_check_modules(UUID REQUIRED IMPORTED_TARGET uuid)
pkg_check_modules(CRYPTO REQUIRED IMPORTED_TARGET libcrypto)
pkg_check_modules(SSL REQUIRED IMPORTED_TARGET libssl)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
pkg_check_modules(SQLITE REQUIRED IMPORTED_TARGET sqlite3)
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
# Libraries only some targets need are looked up where those targets are, so that a build
# without them needs none: cmocka in test/CMakeLists.txt (only with DFC_TESTS), hiredis in
# scheduler/CMakeLists.txt (pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis) there).

# libgrpc.so carries its own dependencies: the long absl list that pkg-config prints is only
# needed for static linking, so link the two core libraries directly.
find_library(GRPC_LIB grpc REQUIRED)
find_library(GPR_LIB gpr REQUIRED)
find_path(GRPC_INCLUDE grpc/grpc.h REQUIRED)
add_library(grpc_core INTERFACE)
target_link_libraries(grpc_core INTERFACE ${GRPC_LIB} ${GPR_LIB} Threads::Threads)
target_include_directories(grpc_core INTERFACE ${GRPC_INCLUDE})

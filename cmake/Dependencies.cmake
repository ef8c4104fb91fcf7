# Every dependency is a Debian bookworm package installed by scripts/install-deps.sh.
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(RocksDB CONFIG REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(ZLIB REQUIRED)
find_package(Boost 1.74 REQUIRED COMPONENTS system)
find_package(PkgConfig REQUIRED)
# libnghttp2: HTTP/2 framing, HPACK and flow control for the client API server (src/client_api).
pkg_check_modules(NGHTTP2 REQUIRED IMPORTED_TARGET libnghttp2)
if(ETCDW_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
# Google Benchmark, for the micro-benchmarks (bench/micro); the sanitizer build has none.
if(NOT ETCDW_SANITIZE)
  find_package(benchmark REQUIRED)
endif()
# jemalloc: the allocator of the etcd-wrapper and etcdbrctl binaries (docs/performance.md: 10-15%
# less server CPU per write than glibc's malloc). Libraries and tests keep the system allocator, so
# the sanitizer build, which has no binaries, is unaffected.
if(ETCDW_INTEGRATION)
  pkg_check_modules(JEMALLOC REQUIRED IMPORTED_TARGET jemalloc)
endif()

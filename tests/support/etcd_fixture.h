// The snapshot etcd 3.4.23 made for the tests (tests/bbolt/testdata/etcd34_snapshot.db.gz: a
// bbolt database and etcd's SHA-256 trailer, gzip-compressed), and what it holds: written by
//   put a 1; put b 2; put a 3; del b; lease grant 600; put leased v --lease;
//   put bin\x01key v\0x (the shell lost the NUL: the value is "vx"); put k1..k300 value-1..;
//   compaction 3
// so the revisions are a@2, b@3, a@4, b deleted @5, leased@6, bin\x01key@7, k<i>@7+i (307).
// Header-only; the test links zlib and defines ETCDW_SOURCE_DIR.
#pragma once

#include <zlib.h>

#include <string>

namespace etcdw::testsupport {

inline constexpr int64_t kEtcdFixtureRevision = 307;
inline constexpr int64_t kEtcdFixtureCompactRevision = 3;
inline constexpr int64_t kEtcdFixtureLeaseTtl = 600;

// The uncompressed snapshot file's bytes; empty when it cannot be read.
inline std::string EtcdFixtureSnapshot() {
  const std::string path =
      std::string(ETCDW_SOURCE_DIR) + "/tests/bbolt/testdata/etcd34_snapshot.db.gz";
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  std::string out;
  char buf[65536];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return n < 0 ? std::string() : out;
}

}  // namespace etcdw::testsupport

// Feeds our snapshot format ("ETCDWSNP", mvcc/snapshot.h) to what reads it: RestoreSnapshot (a
// restore, and a follower installing a snapshot from its leader) into an in-memory engine,
// mvcc's VerifySnapshotFile, and the sidecar's checks of a backup (VerifyFullSnapshotFile,
// VerifyDeltaSnapshotFile) on the same bytes as a file. Beyond not crashing, it checks that:
// - a refusal is DataLoss with a message (NotFound or Internal only for a file that cannot be
//   opened, which never happens here);
// - a snapshot that restores also passes every file check (its trailer and size are right);
// - what it restored, written again by SnapshotWriter (its TotalSize exactly), restores and is
//   written again to the same bytes: the records read are the records held, consistently.
// Input: byte 0 bit 0 set: the rest is the file as is. Otherwise the rest is the records of a
// snapshot that the harness frames: the header before them, the end marker after them (unless
// byte 0 bit 1 is set), the zero padding and the right SHA-256 trailer, so that inputs reach
// success.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "etcdw/common/hash.h"
#include "etcdw/common/status.h"
#include "etcdw/mvcc/snapshot.h"
#include "etcdw/sidecar/snapshot_verify.h"
#include "etcdw/storage/engine.h"
#include "in_memory_engine.h"
#include "scratch_dir.h"

namespace {

using etcdw::Code;
using etcdw::Status;
namespace storage = etcdw::storage;
namespace mvcc = etcdw::mvcc;

[[noreturn]] void Fail(const char* what, const Status& st = Status::Ok()) {
  std::fprintf(stderr, "snapshot_file_fuzzer: %s (%s)\n", what, st.message().c_str());
  std::abort();
}

Status Restore(storage::Engine& engine, const std::string& bytes) {
  if (Status st = mvcc::ClearState(engine); !st.ok()) Fail("clearing the engine failed", st);
  std::istringstream in(bytes);
  return mvcc::RestoreSnapshot(in, engine);
}

std::string Write(const storage::Engine& engine) {
  mvcc::SnapshotWriter w(engine);
  auto total = w.TotalSize();
  if (!total.ok()) Fail("TotalSize failed", total.status());
  std::string out;
  for (;;) {
    auto more = w.Next(out, 1024);
    if (!more.ok()) Fail("writing a snapshot failed", more.status());
    if (!*more) break;
  }
  if (out.size() != *total) Fail("a snapshot is not the size TotalSize said");
  return out;
}

void WriteFile(const std::string& path, std::string_view data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) Fail("cannot write the snapshot file");
}

// The file checks of `bytes`: whether each passed. A refusal must be DataLoss with a message.
struct FileChecks {
  bool mvcc = false, full = false, delta = false;
};
FileChecks CheckFile(const std::string& bytes) {
  const std::string path = etcdw::fuzz::ScratchDir("snapshot_file_fuzzer") + "/snapshot";
  WriteFile(path, bytes);
  const auto passed = [](const Status& st) {
    if (st.ok()) return true;
    if (st.code() != Code::kDataLoss || st.message().empty()) {
      Fail("a file check refused otherwise than DataLoss with a message", st);
    }
    return false;
  };
  return {passed(mvcc::VerifySnapshotFile(path)),
          passed(etcdw::sidecar::VerifyFullSnapshotFile(path)),
          passed(etcdw::sidecar::VerifyDeltaSnapshotFile(path))};
}

std::string Frame(std::string_view records, bool end_marker) {
  std::string s(mvcc::kSnapshotMagic);
  s += std::string("\0\0\0\1", 4);
  s += records;
  if (end_marker) s += '\xff';
  s.append((512 - s.size() % 512) % 512, '\0');
  etcdw::common::Sha256 sha;
  sha.Update(s);
  const auto digest = sha.Final();
  s.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string bytes = (data[0] & 1) ? std::string(in) : Frame(in, (data[0] & 2) == 0);

  const FileChecks files = CheckFile(bytes);
  if (files.full && !files.delta) Fail("a full snapshot's trailer passed, a delta's did not");
  storage::Engine& engine = etcdw::fuzz::InMemoryEngine();
  const Status st = Restore(engine, bytes);
  if (!st.ok()) {
    if (st.code() != Code::kDataLoss || st.message().empty()) {
      Fail("a restore refused otherwise than DataLoss with a message", st);
    }
    return 0;
  }
  if (!files.mvcc || !files.full) Fail("a snapshot that restores fails a file check");

  const std::string written = Write(engine);
  const FileChecks again = CheckFile(written);
  if (!again.mvcc || !again.full) Fail("a snapshot written fails a file check");
  const Status st2 = Restore(engine, written);
  if (!st2.ok()) Fail("a snapshot written from a restore does not restore", st2);
  if (Write(engine) != written) Fail("a snapshot restored and written again is not the same");
  return 0;
}

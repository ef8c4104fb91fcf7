// The two ends of a Raft snapshot's transfer between members, as the peer transport sees them
// (peer_transport.h: SnapshotSink, SnapshotSource): the receiver stages the bytes in a file that
// appears under its final name only once complete, synced and verified; the sender streams a
// consistent copy of its state (mvcc/snapshot.h). Internal to the member core (RaftNode); both
// run on the peer transport's thread.
#pragma once

#include <string>
#include <string_view>

#include "etcdw/common/status.h"
#include "etcdw/mvcc/snapshot.h"
#include "etcdw/peer_transport/peer_transport.h"
#include "etcdw/storage/engine.h"

namespace etcdw::member {

// A received snapshot's bytes, written to `path`.part; Finish syncs the file, verifies the
// snapshot's checksum and renames it to `path`. Destroyed unfinished, it removes the part file.
class SnapshotFileSink final : public peer_transport::SnapshotSink {
 public:
  explicit SnapshotFileSink(std::string path);
  ~SnapshotFileSink() override;
  Status Write(std::string_view chunk) override;
  Status Finish() override;

 private:
  std::string path_;
  int fd_ = -1;
};

// A snapshot to send: the state as of construction (a pinned storage snapshot), handed out in
// chunks of at most max_bytes (the writer produces whole records, which may be larger).
class StateSnapshotSource final : public peer_transport::SnapshotSource {
 public:
  explicit StateSnapshotSource(const storage::Engine& e) : writer_(e) {}
  Result<bool> Next(std::string& out, size_t max_bytes) override;

 private:
  mvcc::SnapshotWriter writer_;
  std::string buf_;
  size_t pos_ = 0;
  bool done_ = false;
};

}  // namespace etcdw::member

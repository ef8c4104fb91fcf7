// EtcdServer's Maintenance API (etcd_server.h): alarms, status, defragmentation, hashes and
// snapshots. The slow ones run on the task threads, off the caller's.
#include <chrono>
#include <filesystem>

#include "etcdw/common/logging.h"
#include "etcdw/common/version.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/member/raft_node.h"
#include "etcdw/mvcc/hash.h"

namespace etcdw::member {

void EtcdServer::Alarm(const etcdserverpb::AlarmRequest& r,
                       Reply<etcdserverpb::AlarmResponse> reply) {
  internalpb::Request req;
  *req.mutable_alarm() = r;
  ProposeFor(std::move(req), std::move(reply));
}

etcdserverpb::StatusResponse EtcdServer::StatusInfo() {
  etcdserverpb::StatusResponse resp;
  FillHeader(resp.mutable_header());
  resp.set_version(kEtcdVersion);
  resp.set_dbsize(static_cast<int64_t>(engine_->SizeOnDisk()));
  resp.set_dbsizeinuse(static_cast<int64_t>(engine_->SizeInUse()));
  resp.set_leader(node_->Leader());
  resp.set_raftindex(node_->CommitIndex());
  resp.set_raftterm(node_->Term());
  resp.set_raftappliedindex(node_->AppliedIndex());
  resp.set_islearner(IsLearner());
  for (const auto& a : alarms_->Get(etcdserverpb::NONE)) {
    // The Go text form of the AlarmMember message, as etcd reports it.
    resp.add_errors("memberID:" + std::to_string(a.memberid()) +
                    " alarm:" + etcdserverpb::AlarmType_Name(a.alarm()) + " ");
  }
  return resp;
}

void EtcdServer::Defragment(Reply<etcdserverpb::DefragmentResponse> reply) {
  tasks_->Submit([this, reply] {
    log::Info("defragmenting", {log::F("size-before", engine_->SizeOnDisk())});
    Status st = engine_->CompactAll();
    quota_->Refresh();
    if (!st.ok()) return reply(st);
    log::Info("defragmented", {log::F("size-after", engine_->SizeOnDisk())});
    etcdserverpb::DefragmentResponse resp;
    FillHeader(resp.mutable_header());
    reply(std::move(resp));
  });
}

void EtcdServer::Hash(Reply<etcdserverpb::HashResponse> reply) {
  tasks_->Submit([this, reply] {
    auto h = mvcc::HashAll(*engine_);
    if (!h.ok()) return reply(h.status());
    etcdserverpb::HashResponse resp;
    resp.set_hash(h.value());
    FillHeader(resp.mutable_header());
    reply(std::move(resp));
  });
}

void EtcdServer::HashKV(const etcdserverpb::HashKVRequest& r,
                        Reply<etcdserverpb::HashKVResponse> reply) {
  int64_t rev = r.revision();
  tasks_->Submit([this, rev, reply] {
    auto h = mvcc::HashKV(*kv_, rev);
    if (!h.ok()) return reply(h.status());
    etcdserverpb::HashKVResponse resp;
    resp.set_hash(h->hash);
    resp.set_compact_revision(h->compact_rev);
    resp.mutable_header()->set_revision(h->rev);
    FillHeader(resp.mutable_header());
    reply(std::move(resp));
  });
}

namespace {

constexpr char kExportPrefix[] = "snapshot-export-";
constexpr char kExportSuffix[] = ".tmp";

// Removes the export files a crashed process left in `dir` (the caller knows none is in use).
void RemoveExportLeftovers(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kExportPrefix, 0) != 0 || name.find(kExportSuffix) == std::string::npos) {
      continue;
    }
    std::error_code rm;
    std::filesystem::remove(entry.path(), rm);
    log::Warn("removed a snapshot export left behind", {log::F("file", entry.path().string())});
  }
}

}  // namespace

void EtcdServer::OpenSnapshot(
    Reply<std::pair<std::shared_ptr<mvcc::SnapshotFileStream>, uint64_t>> reply) {
  // The state is pinned now; the members and alarms are read alongside (an etcd restore replaces
  // the membership anyway, and both are informative only).
  std::shared_ptr<storage::Snapshot> snap = engine_->GetSnapshot();
  mvcc::EtcdExportOptions opts;
  for (const auto& m : membership_.List()) {
    opts.members.push_back({m.id, m.name, m.peer_urls, m.client_urls, m.is_learner});
  }
  opts.removed_members = membership_.RemovedIds();
  for (const auto& a : alarms_->Get(etcdserverpb::NONE)) {
    opts.alarms.push_back({a.memberid(), static_cast<int>(a.alarm())});
  }
  opts.cluster_version = std::string(kEtcdApiVersion) + ".0";
  const std::string dir = cfg_.data_dir + "/member";
  const std::string path =
      dir + "/" + kExportPrefix + std::to_string(next_export_.fetch_add(1)) + kExportSuffix;
  tasks_->Submit([this, snap, opts = std::move(opts), dir, path, reply] {
    if (exports_running_.fetch_add(1) == 0) RemoveExportLeftovers(dir);
    const auto started = std::chrono::steady_clock::now();
    auto summary = mvcc::ExportEtcdBackend(*engine_, *snap, path, opts);
    Result<std::unique_ptr<mvcc::SnapshotFileStream>> stream =
        summary.ok() ? mvcc::SnapshotFileStream::OpenAndUnlink(path)
                     : Result<std::unique_ptr<mvcc::SnapshotFileStream>>(summary.status());
    exports_running_.fetch_sub(1);
    if (!stream.ok()) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
      log::Error("snapshot export failed", {log::F("error", stream.status().ToString())});
      return reply(stream.status());
    }
    const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - started)
                           .count();
    log::Info("snapshot exported as etcd's backend",
              {log::F("revision", summary->revision), log::F("changes", summary->changes),
               log::F("leases", summary->leases), log::F("bytes", (*stream)->size()),
               log::F("took-ms", ms)});
    const uint64_t size = (*stream)->size();
    reply(std::make_pair(std::shared_ptr<mvcc::SnapshotFileStream>(std::move(*stream)), size));
  });
}

}  // namespace etcdw::member

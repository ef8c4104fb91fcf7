// EtcdServer's Maintenance API (etcd_server.h): alarms, status, defragmentation, hashes and
// snapshots. The slow ones run on the task threads, off the caller's.
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

void EtcdServer::OpenSnapshot(
    Reply<std::pair<std::shared_ptr<mvcc::SnapshotWriter>, uint64_t>> reply) {
  auto writer = std::make_shared<mvcc::SnapshotWriter>(*engine_);
  tasks_->Submit([writer, reply] {
    auto size = writer->TotalSize();
    if (!size.ok()) return reply(size.status());
    reply(std::make_pair(writer, size.value()));
  });
}

}  // namespace etcdw::member

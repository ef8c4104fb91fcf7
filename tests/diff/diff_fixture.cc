#include "diff_fixture.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

namespace etcdw::testing {

using etcdserverpb::Compare;
using etcdserverpb::RequestOp;

std::string Outcome::ToString() const {
  if (code != grpc::StatusCode::OK) {
    return "error code=" + std::to_string(static_cast<int>(code)) + " message=\"" + message + "\"";
  }
  return "ok " + response;
}

std::string HttpExchange(int port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "connect failed";
  }
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string got;
  char buf[16384];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) {
    got.append(buf, static_cast<size_t>(n));
    const size_t head_end = got.find("\r\n\r\n");
    const size_t cl = got.find("Content-Length: ");
    if (head_end != std::string::npos && cl != std::string::npos && cl < head_end &&
        got.size() >= head_end + 4 + std::stoul(got.substr(cl + 16))) {
      break;
    }
  }
  close(fd);
  return got;
}

bool Verbose() {
  static const bool verbose = std::getenv("ETCDW_DIFF_VERBOSE") != nullptr;
  return verbose;
}

void NormalizeHeaders(google::protobuf::Message* m) {
  const auto* desc = m->GetDescriptor();
  const auto* refl = m->GetReflection();
  if (desc->full_name() == "etcdserverpb.ResponseHeader") {
    auto* h = static_cast<etcdserverpb::ResponseHeader*>(m);
    h->set_cluster_id(h->cluster_id() != 0 ? 1 : 0);
    h->set_member_id(h->member_id() != 0 ? 1 : 0);
    h->set_raft_term(h->raft_term() != 0 ? 1 : 0);
    return;
  }
  for (int i = 0; i < desc->field_count(); ++i) {
    const auto* f = desc->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int j = 0; j < refl->FieldSize(*m, f); ++j) {
        NormalizeHeaders(refl->MutableRepeatedMessage(m, f, j));
      }
    } else if (refl->HasField(*m, f)) {
      NormalizeHeaders(refl->MutableMessage(m, f));
    }
  }
}

std::string Normalized(const google::protobuf::Message& m) {
  std::unique_ptr<google::protobuf::Message> copy(m.New());
  copy->CopyFrom(m);
  NormalizeHeaders(copy.get());
  std::string out;
  google::protobuf::TextFormat::Printer p;
  p.SetSingleLineMode(true);
  p.PrintToString(*copy, &out);
  return out;
}

namespace {

int DiffMembers() {
  const char* v = std::getenv("ETCDW_DIFF_MEMBERS");
  int n = v ? std::atoi(v) : 1;
  return n > 1 ? n : 1;
}

// Starts (or restarts) `c` and returns a follower, or null (with a test failure).
Member* StartCluster(TestCluster& c, const Settings& extra) {
  EXPECT_TRUE(c.StartAll(extra)) << c.member(0).label() << " cluster did not start\n"
                                 << c.LogTails();
  int leader = c.WaitForLeader();
  EXPECT_GE(leader, 0) << c.member(0).label() << " cluster has no leader\n" << c.LogTails();
  if (leader < 0) return nullptr;
  return &c.member((leader + 1) % c.size());
}

}  // namespace

void DiffTest::StartBoth(const Settings& extra) {
  extra_ = extra;
  int n = DiffMembers();
  if (n == 1) {
    etcd_single_ = std::make_unique<Member>(Member::Kind::kEtcd);
    ours_single_ = std::make_unique<Member>(Member::Kind::kEtcdWrapper);
    etcd_ = etcd_single_.get();
    ours_ = ours_single_.get();
    ASSERT_TRUE(etcd_->Start(extra)) << "etcd did not start:\n" << etcd_->log();
    ASSERT_TRUE(ours_->Start(extra)) << "etcd-wrapper did not start:\n" << ours_->log();
    return;
  }
  etcd_cluster_ = std::make_unique<TestCluster>(n, Member::Kind::kEtcd);
  ours_cluster_ = std::make_unique<TestCluster>(n, Member::Kind::kEtcdWrapper);
  etcd_ = StartCluster(*etcd_cluster_, etcd_cluster_->SettingsFor(extra));
  ASSERT_NE(etcd_, nullptr);
  ours_ = StartCluster(*ours_cluster_, ours_cluster_->SettingsFor(extra));
  ASSERT_NE(ours_, nullptr);
}

void DiffTest::RestartBoth() {
  if (!Clustered()) {
    for (Member* m : both()) {
      ASSERT_TRUE(m->Stop().has_value()) << m->label() << " did not stop";
    }
    // Both start together: what counts from the start (leases' remaining TTLs, refreshed when
    // a leader takes them over) must not differ by how long the other side took to start.
    for (Member* m : both()) ASSERT_TRUE(m->Launch(extra_)) << m->label() << " did not launch";
    ASSERT_TRUE(etcd_->WaitReady()) << "etcd did not restart:\n" << etcd_->log();
    ASSERT_TRUE(ours_->WaitReady()) << "etcd-wrapper did not restart:\n" << ours_->log();
    return;
  }
  for (TestCluster* c : {etcd_cluster_.get(), ours_cluster_.get()}) {
    for (int i = 0; i < c->size(); ++i) {
      ASSERT_TRUE(c->member(i).Stop().has_value()) << c->member(i).label() << " did not stop";
    }
  }
  // The member called keeps its place (its ID is cached); the others just rejoin. Both clusters
  // start together, as the single members do above.
  for (TestCluster* c : {etcd_cluster_.get(), ours_cluster_.get()}) {
    for (int i = 0; i < c->size(); ++i) ASSERT_TRUE(c->member(i).Launch(c->SettingsFor(extra_)));
  }
  for (TestCluster* c : {etcd_cluster_.get(), ours_cluster_.get()}) {
    for (int i = 0; i < c->size(); ++i) ASSERT_TRUE(c->member(i).WaitReady());
  }
}

void DiffTest::TearDown() {
  if (HasFailure() && ours_) {
    std::string log = ours_->log();
    if (log.size() > 4000) log = log.substr(log.size() - 4000);
    std::cerr << "---- etcd-wrapper log (tail) ----\n" << log << "\n";
  }
  etcd_ = nullptr;
  ours_ = nullptr;
  etcd_single_.reset();
  ours_single_.reset();
  etcd_cluster_.reset();
  ours_cluster_.reset();
}

uint64_t DiffTest::MemberId(Member& m) {
  auto it = ids_.find(&m);
  if (it != ids_.end()) return it->second;
  etcdserverpb::StatusResponse resp;
  auto st = m.client().maintenance->Status(Ctx().get(), etcdserverpb::StatusRequest(), &resp);
  EXPECT_TRUE(st.ok()) << m.label() << ": " << st.error_message();
  EXPECT_NE(resp.header().member_id(), 0u);
  ids_[&m] = resp.header().member_id();
  return resp.header().member_id();
}

Outcome DiffTest::Put(const std::string& k, const std::string& v, int64_t lease, bool prev_kv) {
  etcdserverpb::PutRequest r;
  r.set_key(k);
  r.set_value(v);
  r.set_lease(lease);
  r.set_prev_kv(prev_kv);
  return PutReq(r);
}

Outcome DiffTest::PutReq(const etcdserverpb::PutRequest& r) {
  return Same<etcdserverpb::PutResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::PutResponse* out) {
        return c.kv->Put(ctx, r, out);
      },
      "put " + r.ShortDebugString().substr(0, 200));
}

Outcome DiffTest::Range(const etcdserverpb::RangeRequest& r) {
  return Same<etcdserverpb::RangeResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::RangeResponse* out) {
        return c.kv->Range(ctx, r, out);
      },
      "range " + r.ShortDebugString());
}

Outcome DiffTest::Get(const std::string& k, const std::string& end, int64_t rev) {
  return Range(RangeReq(k, end, rev));
}

Outcome DiffTest::Delete(const std::string& k, const std::string& end, bool prev_kv) {
  etcdserverpb::DeleteRangeRequest r;
  r.set_key(k);
  r.set_range_end(end);
  r.set_prev_kv(prev_kv);
  return Same<etcdserverpb::DeleteRangeResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::DeleteRangeResponse* out) {
        return c.kv->DeleteRange(ctx, r, out);
      },
      "delete " + r.ShortDebugString());
}

Outcome DiffTest::Txn(const etcdserverpb::TxnRequest& r) {
  return Same<etcdserverpb::TxnResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::TxnResponse* out) {
        return c.kv->Txn(ctx, r, out);
      },
      "txn " + r.ShortDebugString().substr(0, 300));
}

Outcome DiffTest::Compact(int64_t rev, bool physical) {
  etcdserverpb::CompactionRequest r;
  r.set_revision(rev);
  r.set_physical(physical);
  return Same<etcdserverpb::CompactionResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::CompactionResponse* out) {
        return c.kv->Compact(ctx, r, out);
      },
      "compact " + std::to_string(rev) + (physical ? " physical" : ""));
}

Outcome DiffTest::LeaseGrant(int64_t id, int64_t ttl) {
  etcdserverpb::LeaseGrantRequest r;
  r.set_id(id);
  r.set_ttl(ttl);
  return Same<etcdserverpb::LeaseGrantResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::LeaseGrantResponse* out) {
        return c.lease->LeaseGrant(ctx, r, out);
      },
      "lease grant " + r.ShortDebugString());
}

Outcome DiffTest::LeaseRevoke(int64_t id) {
  etcdserverpb::LeaseRevokeRequest r;
  r.set_id(id);
  return Same<etcdserverpb::LeaseRevokeResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::LeaseRevokeResponse* out) {
        return c.lease->LeaseRevoke(ctx, r, out);
      },
      "lease revoke " + std::to_string(id));
}

Outcome DiffTest::HashKV(int64_t rev) {
  etcdserverpb::HashKVRequest r;
  r.set_revision(rev);
  // Hash values depend on the storage layout (bbolt vs RocksDB): checked for presence only.
  return Same<etcdserverpb::HashKVResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::HashKVResponse* out) {
        return c.maintenance->HashKV(ctx, r, out);
      },
      "hashkv " + std::to_string(rev),
      [](Member& m, etcdserverpb::HashKVResponse* resp) {
        EXPECT_NE(resp->hash(), 0u) << m.label();
        resp->set_hash(1);
      });
}

Outcome DiffTest::Defragment() {
  return Same<etcdserverpb::DefragmentResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::DefragmentResponse* out) {
        return c.maintenance->Defragment(ctx, etcdserverpb::DefragmentRequest(), out);
      },
      "defragment");
}

Outcome DiffTest::Alarm(etcdserverpb::AlarmRequest::AlarmAction action,
                        etcdserverpb::AlarmType type, uint64_t member_id) {
  MemberId(etcd());
  MemberId(ours());
  return Same<etcdserverpb::AlarmResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::AlarmResponse* out) {
        etcdserverpb::AlarmRequest r;
        r.set_action(action);
        r.set_alarm(type);
        uint64_t id = member_id;
        if (id == 0) id = ids_[&MemberOf(c)];
        r.set_memberid(id);
        return c.maintenance->Alarm(ctx, r, out);
      },
      "alarm " + etcdserverpb::AlarmRequest::AlarmAction_Name(action) + " " +
          etcdserverpb::AlarmType_Name(type),
      [this](Member& m, etcdserverpb::AlarmResponse* resp) {
        for (auto& a : *resp->mutable_alarms()) {
          if (a.memberid() == ids_[&m]) a.set_memberid(1);  // "self"
        }
        if (!Clustered()) return;
        // In a cluster, which members raise NOSPACE is a race (any member whose apply finds
        // the store full, and each member whose quota check refuses a request): compare the
        // alarm types raised, in the cluster's name.
        std::set<int> types;
        for (const auto& a : resp->alarms()) types.insert(a.alarm());
        resp->clear_alarms();
        for (int t : types) {
          auto* a = resp->add_alarms();
          a->set_memberid(1);
          a->set_alarm(static_cast<etcdserverpb::AlarmType>(t));
        }
      });
}

void DiffTest::PutBoth(const std::string& k, const std::string& v, int64_t lease) {
  for (Member* m : both()) {
    auto st = m->client().Put(k, v, lease);
    ASSERT_TRUE(st.ok()) << m->label() << ": put " << k << ": " << st.error_message();
  }
}

int64_t DiffTest::SameRevision() {
  int64_t revs[2];
  int i = 0;
  for (Member* m : both()) {
    etcdserverpb::RangeResponse r;
    auto st = m->client().Get("\x01-revision-probe", &r);
    EXPECT_TRUE(st.ok()) << m->label() << ": " << st.error_message();
    revs[i++] = r.header().revision();
  }
  EXPECT_EQ(revs[0], revs[1]) << "current revisions differ";
  return revs[0];
}

// ---------------------------------------------------------------------------------------------

struct WatchSession::Impl {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>>
      stream;
  std::thread reader;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<etcdserverpb::WatchResponse> queue;
  bool done = false;
};

WatchSession::WatchSession(Member& m) : impl_(std::make_unique<Impl>()) {
  impl_->stream = m.client().watch->Watch(&impl_->ctx);
  Impl* impl = impl_.get();
  impl_->reader = std::thread([impl] {
    etcdserverpb::WatchResponse resp;
    while (impl->stream->Read(&resp)) {
      std::lock_guard lock(impl->mu);
      impl->queue.push_back(resp);
      impl->cv.notify_all();
    }
    std::lock_guard lock(impl->mu);
    impl->done = true;
    impl->cv.notify_all();
  });
}

WatchSession::~WatchSession() {
  impl_->ctx.TryCancel();
  impl_->reader.join();
  impl_->stream->Finish();
}

bool WatchSession::Send(const etcdserverpb::WatchRequest& req) { return impl_->stream->Write(req); }

void WatchSession::CloseSend() { impl_->stream->WritesDone(); }

bool WatchSession::Ended() {
  std::lock_guard lock(impl_->mu);
  return impl_->done && impl_->queue.empty();
}

std::optional<etcdserverpb::WatchResponse> WatchSession::Next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  if (!impl_->cv.wait_for(lock, timeout, [&] { return !impl_->queue.empty() || impl_->done; })) {
    return std::nullopt;
  }
  if (impl_->queue.empty()) return std::nullopt;
  auto r = std::move(impl_->queue.front());
  impl_->queue.pop_front();
  return r;
}

std::vector<etcdserverpb::WatchResponse> WatchSession::Drain(std::chrono::milliseconds quiet) {
  std::vector<etcdserverpb::WatchResponse> out;
  while (auto r = Next(quiet)) out.push_back(std::move(*r));
  return out;
}

void WatchPair::Send(const etcdserverpb::WatchRequest& req) {
  EXPECT_TRUE(etcd_.Send(req)) << "etcd watch stream closed";
  EXPECT_TRUE(ours_.Send(req)) << "etcd-wrapper watch stream closed";
}

std::optional<etcdserverpb::WatchResponse> WatchPair::Next(const std::string& what,
                                                           std::chrono::milliseconds timeout) {
  auto a = etcd_.Next(timeout);
  auto b = ours_.Next(timeout);
  EXPECT_TRUE(a.has_value()) << "etcd sent no watch response: " << what;
  EXPECT_TRUE(b.has_value()) << "etcd-wrapper sent no watch response: " << what;
  if (!a || !b) return std::nullopt;
  EXPECT_EQ(Normalized(*a), Normalized(*b)) << "watch response differs from etcd: " << what;
  if (Verbose()) std::cerr << "[watch] " << what << "\n  -> " << Normalized(*a) << "\n";
  return a;
}

std::vector<etcdserverpb::WatchResponse> WatchPair::NextN(int n, const std::string& what,
                                                          bool by_watch_id,
                                                          std::chrono::milliseconds timeout) {
  std::vector<etcdserverpb::WatchResponse> a, b;
  for (int i = 0; i < n; ++i) {
    auto r = etcd_.Next(timeout);
    EXPECT_TRUE(r.has_value()) << "etcd sent " << i << " of " << n << " responses: " << what;
    if (!r) break;
    a.push_back(*r);
  }
  for (int i = 0; i < n; ++i) {
    auto r = ours_.Next(timeout);
    EXPECT_TRUE(r.has_value()) << "etcd-wrapper sent " << i << " of " << n
                               << " responses: " << what;
    if (!r) break;
    b.push_back(*r);
  }
  if (by_watch_id) {
    auto by_id = [](const auto& x, const auto& y) { return x.watch_id() < y.watch_id(); };
    std::stable_sort(a.begin(), a.end(), by_id);
    std::stable_sort(b.begin(), b.end(), by_id);
  }
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(Normalized(a[i]), Normalized(b[i]))
        << "watch response " << i << " differs from etcd: " << what;
    if (Verbose())
      std::cerr << "[watch] " << what << " #" << i << "\n  -> " << Normalized(a[i]) << "\n";
  }
  return a;
}

void WatchPair::ExpectNothingPending(const std::string& what) {
  Send(ProgressRequest());
  auto r = Next("progress marker: " + what);
  if (r) {
    EXPECT_EQ(r->watch_id(), -1) << "an unexpected response was pending: " << what << "\n"
                                 << r->ShortDebugString();
    EXPECT_EQ(r->events_size(), 0) << what;
  }
}

// ---------------------------------------------------------------------------------------------

etcdserverpb::RangeRequest RangeReq(const std::string& key, const std::string& end, int64_t rev) {
  etcdserverpb::RangeRequest r;
  r.set_key(key);
  r.set_range_end(end);
  r.set_revision(rev);
  return r;
}

RequestOp OpRange(const std::string& key, const std::string& end, int64_t rev) {
  RequestOp op;
  *op.mutable_request_range() = RangeReq(key, end, rev);
  return op;
}

RequestOp OpPut(const std::string& key, const std::string& value, int64_t lease, bool prev_kv) {
  RequestOp op;
  auto* p = op.mutable_request_put();
  p->set_key(key);
  p->set_value(value);
  p->set_lease(lease);
  p->set_prev_kv(prev_kv);
  return op;
}

RequestOp OpDelete(const std::string& key, const std::string& end, bool prev_kv) {
  RequestOp op;
  auto* d = op.mutable_request_delete_range();
  d->set_key(key);
  d->set_range_end(end);
  d->set_prev_kv(prev_kv);
  return op;
}

RequestOp OpTxn(const etcdserverpb::TxnRequest& t) {
  RequestOp op;
  *op.mutable_request_txn() = t;
  return op;
}

namespace {
Compare Cmp(const std::string& key, Compare::CompareTarget t, Compare::CompareResult r,
            const std::string& end) {
  Compare c;
  c.set_key(key);
  c.set_range_end(end);
  c.set_target(t);
  c.set_result(r);
  return c;
}
}  // namespace

Compare CmpVersion(const std::string& key, Compare::CompareResult r, int64_t v,
                   const std::string& end) {
  Compare c = Cmp(key, Compare::VERSION, r, end);
  c.set_version(v);
  return c;
}

Compare CmpCreate(const std::string& key, Compare::CompareResult r, int64_t v,
                  const std::string& end) {
  Compare c = Cmp(key, Compare::CREATE, r, end);
  c.set_create_revision(v);
  return c;
}

Compare CmpMod(const std::string& key, Compare::CompareResult r, int64_t v,
               const std::string& end) {
  Compare c = Cmp(key, Compare::MOD, r, end);
  c.set_mod_revision(v);
  return c;
}

Compare CmpValue(const std::string& key, Compare::CompareResult r, const std::string& v,
                 const std::string& end) {
  Compare c = Cmp(key, Compare::VALUE, r, end);
  c.set_value(v);
  return c;
}

Compare CmpLease(const std::string& key, Compare::CompareResult r, int64_t v,
                 const std::string& end) {
  Compare c = Cmp(key, Compare::LEASE, r, end);
  c.set_lease(v);
  return c;
}

}  // namespace etcdw::testing

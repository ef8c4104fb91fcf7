// Differential testing: the same client calls go to etcd 3.4.23 (Debian's etcd-server) and to
// etcd-wrapper, both started fresh on loopback with the same settings; their answers must be
// the same: gRPC code, error message, and response message.
//
// Normalization: the identity fields of every ResponseHeader (cluster_id, member_id, raft_term)
// legitimately differ between the two members, so they are reduced to "set" (1) or "unset" (0)
// before comparing; the revision is compared as is. A header that etcd leaves out must be left
// out by us too (headers are compared for presence). Anything else that legitimately differs
// (member IDs inside a response, remaining TTLs, sizes) is normalized by the individual test
// with a normalizer passed to Same(), and checked for sanity there.
#pragma once

#include <google/protobuf/message.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "servers.h"
#include "watch_requests.h"

namespace etcdw::testing {

// The key "\0": with range_end "\0", a range over every key.
inline const std::string kZero(1, '\0');

// What one call produced, in comparable form.
struct Outcome {
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;   // gRPC status message (etcd's error string)
  std::string response;  // normalized text form of the response (empty on error)
  bool ok() const { return code == grpc::StatusCode::OK; }
  std::string ToString() const;
};

// True when ETCDW_DIFF_VERBOSE is set: every compared answer is printed.
bool Verbose();

// Reduces the identity fields of every ResponseHeader inside `m` (recursively) to 0 or 1,
// keeping the revision.
void NormalizeHeaders(google::protobuf::Message* m);
// Text form after NormalizeHeaders.
std::string Normalized(const google::protobuf::Message& m);

template <typename Resp>
using CallFn = std::function<grpc::Status(Client&, grpc::ClientContext*, Resp*)>;
// Makes a successful response of member `m` comparable (clears values that legitimately differ
// after checking them). Runs before header normalization.
template <typename Resp>
using NormFn = std::function<void(Member& m, Resp*)>;

class DiffTest : public ::testing::Test {
 protected:
  // Starts etcd and etcd-wrapper with the same extra settings (etcd key names).
  void StartBoth(const Settings& extra = {});
  // Stops both (SIGTERM) and starts them again on their data directories, same settings.
  void RestartBoth();
  void TearDown() override;

  // Whether each side is a cluster (ETCDW_DIFF_MEMBERS > 1), called through a follower.
  bool Clustered() const { return etcd_cluster_ != nullptr; }
  int ClusterSize() const { return etcd_cluster_ ? etcd_cluster_->size() : 1; }
  Member& etcd() { return *etcd_; }
  Member& ours() { return *ours_; }
  std::vector<Member*> both() { return {etcd_, ours_}; }

  // This member's ID (from its Status header), cached.
  uint64_t MemberId(Member& m);
  // The member a client belongs to (for requests that name the member itself).
  Member& MemberOf(Client& c) { return &c == &etcd().client() ? etcd() : ours(); }

  // Runs `call` against one member and captures its outcome.
  template <typename Resp>
  Outcome Call(Member& m, const CallFn<Resp>& call, const NormFn<Resp>& norm = nullptr,
               Resp* raw = nullptr) {
    Resp resp;
    auto ctx = Ctx(std::chrono::seconds(30));
    grpc::Status st = call(m.client(), ctx.get(), &resp);
    Outcome o;
    o.code = st.error_code();
    o.message = st.error_message();
    if (st.ok()) {
      if (raw) *raw = resp;
      if (norm) norm(m, &resp);
      o.response = Normalized(resp);
    }
    return o;
  }

  // Runs `call` against both and expects identical outcomes; returns etcd's.
  template <typename Resp>
  Outcome Same(const CallFn<Resp>& call, const std::string& what = "",
               const NormFn<Resp>& norm = nullptr) {
    Outcome a = Call<Resp>(etcd(), call, norm);
    Outcome b = Call<Resp>(ours(), call, norm);
    EXPECT_EQ(a.ToString(), b.ToString()) << "differs from etcd: " << what;
    if (Verbose()) std::cerr << "[diff] " << what << "\n  -> " << a.ToString() << "\n";
    return a;
  }

  // Shorthands for the most common calls (each compared with Same()).
  Outcome Put(const std::string& k, const std::string& v, int64_t lease = 0, bool prev_kv = false);
  Outcome PutReq(const etcdserverpb::PutRequest& r);
  Outcome Range(const etcdserverpb::RangeRequest& r);
  Outcome Get(const std::string& k, const std::string& end = "", int64_t rev = 0);
  Outcome Delete(const std::string& k, const std::string& end = "", bool prev_kv = false);
  Outcome Txn(const etcdserverpb::TxnRequest& r);
  Outcome Compact(int64_t rev, bool physical = false);
  Outcome LeaseGrant(int64_t id, int64_t ttl);
  Outcome LeaseRevoke(int64_t id);
  Outcome HashKV(int64_t rev);
  Outcome Defragment();
  // Alarm request; the answering member's own ID in the answer is replaced by 1. `member_id`
  // 0 means "the member's own ID".
  Outcome Alarm(etcdserverpb::AlarmRequest::AlarmAction action, etcdserverpb::AlarmType type,
                uint64_t member_id = 0);

  // Puts the same value to both without comparing (bulk setup); fails the test on error.
  void PutBoth(const std::string& k, const std::string& v, int64_t lease = 0);
  // The current revision of each member must be the same; returns it.
  int64_t SameRevision();

 private:
  // With ETCDW_DIFF_MEMBERS=N (N > 1) each side is an N-member cluster and the calls go to one
  // of its followers; otherwise each side is a single member.
  std::unique_ptr<Member> etcd_single_;
  std::unique_ptr<Member> ours_single_;
  std::unique_ptr<TestCluster> etcd_cluster_;
  std::unique_ptr<TestCluster> ours_cluster_;
  Member* etcd_ = nullptr;  // the member called, in its cluster
  Member* ours_ = nullptr;
  std::map<Member*, uint64_t> ids_;
  Settings extra_;
};

// A watch stream on one member, read in the background.
class WatchSession {
 public:
  explicit WatchSession(Member& m);
  ~WatchSession();
  bool Send(const etcdserverpb::WatchRequest& req);
  // Next response within `timeout`, or nullopt.
  std::optional<etcdserverpb::WatchResponse> Next(
      std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Collects responses until none arrives for `quiet`.
  std::vector<etcdserverpb::WatchResponse> Drain(
      std::chrono::milliseconds quiet = std::chrono::milliseconds(500));
  void CloseSend();
  // True once the stream ended and every response was taken.
  bool Ended();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One watch stream on each member, driven with the same requests.
class WatchPair {
 public:
  WatchPair(Member& etcd, Member& ours) : etcd_(etcd), ours_(ours) {}
  void Send(const etcdserverpb::WatchRequest& req);
  // The next response of each, compared after normalization; etcd's response (nullopt if
  // either did not answer within `timeout`).
  std::optional<etcdserverpb::WatchResponse> Next(
      const std::string& what, std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // The next `n` responses of each. With `by_watch_id` the responses are compared after a
  // stable sort by watch ID: etcd delivers the responses of different watchers for one
  // revision in no particular order (it iterates a Go map), while each watcher's own
  // responses stay in order.
  std::vector<etcdserverpb::WatchResponse> NextN(
      int n, const std::string& what, bool by_watch_id = false,
      std::chrono::milliseconds timeout = std::chrono::seconds(15));
  // Sends a progress request to both and expects the progress response (watch_id -1, no
  // events) as the next message of each: proves that nothing else was pending before it.
  void ExpectNothingPending(const std::string& what);
  WatchSession& etcd() { return etcd_; }
  WatchSession& ours() { return ours_; }

 private:
  WatchSession etcd_;
  WatchSession ours_;
};

// Watch requests (support/watch_requests.h).
using testsupport::CancelWatch;
using testsupport::CreateWatch;
using testsupport::ProgressRequest;

// Sends a raw HTTP/1.1 `request` to `port` on loopback and returns the whole answer: until the
// server closes the connection, or until the body its Content-Length announces is in (etcd keeps
// connections open). "connect failed" when nothing listens.
std::string HttpExchange(int port, const std::string& request);

// Request builders.
etcdserverpb::RangeRequest RangeReq(const std::string& key, const std::string& end = "",
                                    int64_t rev = 0);
etcdserverpb::RequestOp OpRange(const std::string& key, const std::string& end = "",
                                int64_t rev = 0);
etcdserverpb::RequestOp OpPut(const std::string& key, const std::string& value, int64_t lease = 0,
                              bool prev_kv = false);
etcdserverpb::RequestOp OpDelete(const std::string& key, const std::string& end = "",
                                 bool prev_kv = false);
etcdserverpb::RequestOp OpTxn(const etcdserverpb::TxnRequest& t);

// Compare builders: target and result, with the value to compare against.
etcdserverpb::Compare CmpVersion(const std::string& key, etcdserverpb::Compare::CompareResult r,
                                 int64_t v, const std::string& end = "");
etcdserverpb::Compare CmpCreate(const std::string& key, etcdserverpb::Compare::CompareResult r,
                                int64_t v, const std::string& end = "");
etcdserverpb::Compare CmpMod(const std::string& key, etcdserverpb::Compare::CompareResult r,
                             int64_t v, const std::string& end = "");
etcdserverpb::Compare CmpValue(const std::string& key, etcdserverpb::Compare::CompareResult r,
                               const std::string& v, const std::string& end = "");
etcdserverpb::Compare CmpLease(const std::string& key, etcdserverpb::Compare::CompareResult r,
                               int64_t v, const std::string& end = "");

}  // namespace etcdw::testing

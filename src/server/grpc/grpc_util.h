// Helpers shared by the gRPC service implementations.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string_view>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/status.h"
#include "etcdw/server/etcd_server.h"

namespace etcdw::server::grpcapi {

inline grpc::Status ToGrpc(const Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), st.message());
}

// Counts unary calls answered asynchronously, so a graceful stop can wait for exactly those
// (gRPC's own Shutdown(deadline) also waits for idle client connections until the deadline).
class CallTracker {
 public:
  void Enter() {
    std::lock_guard lock(mu_);
    ++n_;
  }
  void Leave() {
    std::lock_guard lock(mu_);
    if (--n_ == 0) cv_.notify_all();
  }
  // Waits until no call is in flight; false on timeout.
  bool WaitIdle(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return n_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_ = 0;
};

// Answers a unary call from a server Reply: on success moves the result into `out`, fills its
// header (unless etcd sends none for this call) and finishes OK; otherwise finishes with the
// error. The call counts as in flight until then.
template <typename Resp>
Reply<Resp> FinishWith(EtcdServer& server, CallTracker& calls, grpc::ServerUnaryReactor* reactor,
                       Resp* out, bool header = true) {
  calls.Enter();
  return [&server, &calls, reactor, out, header](Result<Resp> r) {
    if (!r.ok()) {
      reactor->Finish(ToGrpc(r.status()));
    } else {
      *out = std::move(r).value();
      if (header) {
        server.FillHeader(out->mutable_header());
      } else {
        out->clear_header();
      }
      reactor->Finish(grpc::Status::OK);
    }
    calls.Leave();
  };
}

std::unique_ptr<grpc::Service> NewKvService(EtcdServer& server, CallTracker& calls);
std::unique_ptr<grpc::Service> NewWatchService(EtcdServer& server);
std::unique_ptr<grpc::Service> NewLeaseService(EtcdServer& server, CallTracker& calls);
std::unique_ptr<grpc::Service> NewMaintenanceService(EtcdServer& server, CallTracker& calls);
std::unique_ptr<grpc::Service> NewClusterService(EtcdServer& server, CallTracker& calls);

// etcd refuses every request on a learner except Status and serializable Range; finishes the
// call with that error and returns false when `s` is a learner.
inline bool LearnerAllows(EtcdServer& s, grpc::ServerUnaryReactor* reactor) {
  if (!s.IsLearner()) return true;
  reactor->Finish(ToGrpc(errors::NotSupportedForLearner()));
  return false;
}

// Why a stream must be refused at its start, as etcd's stream interceptor decides: on a
// learner; or when the client asked for a leader (metadata "hasleader: true", which etcd's Go
// client sends with WithRequireLeader, e.g. kube-apiserver's watches) and none is known.
inline std::optional<Status> RefuseStream(EtcdServer& s, const grpc::CallbackServerContext* ctx) {
  if (s.IsLearner()) return errors::NotSupportedForLearner();
  auto md = ctx->client_metadata().equal_range("hasleader");
  for (auto it = md.first; it != md.second; ++it) {
    if (std::string_view(it->second.data(), it->second.size()) == "true" &&
        s.node().Leader() == 0) {
      return errors::NoLeader();
    }
  }
  return std::nullopt;
}

}  // namespace etcdw::server::grpcapi

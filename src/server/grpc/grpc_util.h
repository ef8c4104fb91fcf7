// Helpers shared by the gRPC service implementations.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include "etcdw/common/status.h"
#include "etcdw/server/etcd_server.h"

namespace etcdw::server::grpcapi {

inline grpc::Status ToGrpc(const Status& st) {
  if (st.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(st.code()), st.message());
}

// Answers a unary call from a server Reply: on success moves the result into `out`, fills its
// header and finishes OK; otherwise finishes with the error.
template <typename Resp>
Reply<Resp> FinishWith(EtcdServer& server, grpc::ServerUnaryReactor* reactor, Resp* out) {
  return [&server, reactor, out](Result<Resp> r) {
    if (!r.ok()) {
      reactor->Finish(ToGrpc(r.status()));
      return;
    }
    *out = std::move(r).value();
    server.FillHeader(out->mutable_header());
    reactor->Finish(grpc::Status::OK);
  };
}

// Like FinishWith, for the answers etcd sends without any header (Alarm, Defragment).
template <typename Resp>
Reply<Resp> FinishWithoutHeader(grpc::ServerUnaryReactor* reactor, Resp* out) {
  return [reactor, out](Result<Resp> r) {
    if (!r.ok()) {
      reactor->Finish(ToGrpc(r.status()));
      return;
    }
    *out = std::move(r).value();
    out->clear_header();
    reactor->Finish(grpc::Status::OK);
  };
}

std::unique_ptr<grpc::Service> NewKvService(EtcdServer& server);
std::unique_ptr<grpc::Service> NewWatchService(EtcdServer& server);
std::unique_ptr<grpc::Service> NewLeaseService(EtcdServer& server);
std::unique_ptr<grpc::Service> NewMaintenanceService(EtcdServer& server);
std::unique_ptr<grpc::Service> NewClusterService(EtcdServer& server);

}  // namespace etcdw::server::grpcapi

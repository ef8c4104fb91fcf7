// The calls the native server answers, by HTTP/2 path ("/etcdserverpb.KV/Put"), each a
// function from the request's message bytes to one answer.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/status.h"
#include "etcdw/server/etcd_server.h"
#include "grpc_wire.h"
#include "h2_connection.h"

namespace etcdw::server::rpc {

// Completes one call: OK with the framed response message, or an error (`framed` unused).
// Called exactly once, from any thread.
using Answer = std::function<void(const Status& st, std::string framed)>;

// How an open stream answers, from any thread: messages, then one end. Both are ignored once
// the stream is gone or ended.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // `written` (optional) is told, on the connection's event loop, once the message is handed to
  // the transport or dropped (H2Connection::Written): a producer that waits for it before
  // sending more never holds more than one message per stream in memory.
  virtual void Send(std::string framed, Written written = nullptr) = 0;
  virtual void Finish(const Status& st) = 0;
};

// One open stream of a streaming method. Owned by its connection's event loop and called only
// there; work it hands to other threads reaches the client through its StreamSink.
class StreamCall {
 public:
  virtual ~StreamCall() = default;
  virtual void OnMessage(std::string_view payload) = 0;
  // The client sent its last message.
  virtual void OnHalfClose() = 0;
  // The stream is gone (ended, cancelled, or its connection closed): nothing follows.
  virtual void OnGone() {}
};

// Why a stream must be refused at its start, as etcd's stream interceptor decides: on a
// learner; or when the client asked for a leader ("hasleader: true") and none is known.
std::optional<Status> RefuseStream(EtcdServer& server, const H2Connection::Request& req);

class MethodTable {
 public:
  using Unary = std::function<void(std::string_view payload, Answer answer)>;
  // Opens a stream (headers received); may end it at once through the sink.
  using OpenStream = std::function<std::unique_ptr<StreamCall>(const H2Connection::Request& req,
                                                               std::shared_ptr<StreamSink> sink)>;

  // Adds a streaming method. As etcd's stream interceptor does for every stream, RefuseStream
  // may end a stream at its start; otherwise `make(sink)` opens the call.
  template <typename Make>
  void AddStream(EtcdServer& server, std::string path, Make make) {
    streams_[std::move(path)] =
        [&server, make](const H2Connection::Request& req,
                        std::shared_ptr<StreamSink> sink) -> std::unique_ptr<StreamCall> {
      if (auto refused = RefuseStream(server, req)) {
        sink->Finish(*refused);
        return nullptr;
      }
      return make(std::move(sink));
    };
  }
  const OpenStream* FindStream(const std::string& path) const {
    auto it = streams_.find(path);
    return it == streams_.end() ? nullptr : &it->second;
  }
  // Whether any method of `service` ("etcdserverpb.KV") is served.
  bool HasService(const std::string& service) const {
    const std::string prefix = "/" + service + "/";
    auto has = [&](const auto& m) {
      for (const auto& [path, fn] : m) {
        if (path.rfind(prefix, 0) == 0) return true;
      }
      return false;
    };
    return has(unary_) || has(streams_);
  }

  // Adds a unary method served by `call` (etcd's Reply convention). The response's header is
  // filled from `server` (member, revision, term) when the call succeeds, as etcd does.
  // What a successful answer's header carries: member, revision and term (most calls); no
  // revision (the Cluster service, as etcd's); none at all (Alarm, Defragment, MoveLeader, as
  // etcd's); or what the call put there itself (Status).
  enum class Header { kFull, kCluster, kNone, kAsAnswered };

  template <typename Req, typename Resp>
  void AddUnary(EtcdServer& server, std::string path,
                std::function<void(const Req&, Reply<Resp>)> call, Header header = Header::kFull) {
    unary_[std::move(path)] = [&server, call, header](std::string_view payload, Answer answer) {
      // The request lives until its answer: some calls (ranges) read it after they return.
      auto req = std::make_shared<Req>();
      if (Status st = ParseRequest(payload, req.get()); !st.ok()) return answer(st, {});
      call(*req, [&server, req, header, answer = std::move(answer)](Result<Resp> r) {
        if (!r.ok()) return answer(r.status(), {});
        switch (header) {
          case Header::kFull:
            server.FillHeader(r->mutable_header());
            break;
          case Header::kCluster:
            server.FillClusterHeader(r->mutable_header());
            break;
          case Header::kNone:
            r->clear_header();
            break;
          case Header::kAsAnswered:
            break;
        }
        answer(Status::Ok(), FrameMessage(*r));
      });
    };
  }

  // Adds a unary method served by EtcdServer's `call`, refused on a learner as etcd refuses
  // every request there except Status and serializable ranges.
  template <typename Req, typename Resp>
  void AddRefusedOnLearner(EtcdServer& server, std::string path,
                           void (EtcdServer::*call)(const Req&, Reply<Resp>),
                           Header header = Header::kFull) {
    AddUnary<Req, Resp>(
        server, std::move(path),
        [&server, call](const Req& r, Reply<Resp> done) {
          if (server.IsLearner()) return done(errors::NotSupportedForLearner());
          (server.*call)(r, std::move(done));
        },
        header);
  }

  // nullptr when no method has this path.
  const Unary* Find(const std::string& path) const {
    auto it = unary_.find(path);
    return it == unary_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<std::string, Unary> unary_;
  std::unordered_map<std::string, OpenStream> streams_;
};

// etcdserverpb.KV: Range, Put, DeleteRange, Txn, Compact (kv_methods.cc).
void AddKvMethods(MethodTable& table, EtcdServer& server);
// etcdserverpb.Cluster: MemberAdd, MemberRemove, MemberUpdate, MemberList, MemberPromote
// (cluster_methods.cc).
void AddClusterMethods(MethodTable& table, EtcdServer& server);
// etcdserverpb.Lease: LeaseGrant, LeaseRevoke, LeaseKeepAlive, LeaseTimeToLive, LeaseLeases
// (lease_methods.cc).
void AddLeaseMethods(MethodTable& table, EtcdServer& server);

// etcdserverpb.Maintenance: Alarm, Status, Defragment, Hash, HashKV, Snapshot, MoveLeader
// (maintenance_methods.cc).
void AddMaintenanceMethods(MethodTable& table, EtcdServer& server);
// etcdserverpb.Watch: Watch (watch_methods.cc).
void AddWatchMethods(MethodTable& table, EtcdServer& server);

}  // namespace etcdw::server::rpc

// The calls the native server answers, by HTTP/2 path ("/etcdserverpb.KV/Put"), each a
// function from the request's message bytes to one answer.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "call_context.h"
#include "call_stats.h"
#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/status.h"
#include "etcdw/member/etcd_server.h"
#include "grpc_wire.h"
#include "h2_connection.h"
#include "stream_call.h"

namespace etcdw::client_api {

// Why a stream must be refused at its start, as etcd's stream interceptor decides: on a
// learner; or when the client asked for a leader ("hasleader: true") and none is known.
std::optional<Status> RefuseStream(member::EtcdServer& server, const CallContext& ctx);

// What a method asks of its caller's identity before it runs, as etcd's API layer checks it
// (the member judges the rest when it serves or applies the request): nothing; that a token, if
// the call carries one, is one the member knows (else InvalidAuthToken); or the root role once
// authentication is enabled (etcd's IsAdminPermitted). etcd 3.4's Maintenance service checks
// the same but returns the auth package's errors unconverted: code Unknown and texts such as
// "auth: permission denied" (the kMaintenance* variants).
enum class Identity { kNone, kValidToken, kAdmin, kMaintenanceValidToken, kMaintenanceAdmin };

// The identity a call runs as (etcd's AuthInfoFromCtx): the user its token names, else the
// Common Name of its client certificate, else nobody (an empty AuthInfo, refused by every
// permission check while authentication is enabled). InvalidAuthToken for a token the member
// does not know, whether or not authentication is enabled, as etcd answers.
Result<member::AuthInfo> CallerOf(member::EtcdServer& server, const CallContext& ctx);
// Checks `ctx` for `required` (auth_methods.cc).
Status CheckIdentity(member::EtcdServer& server, const CallContext& ctx, Identity required);

// Wraps a stream opened with "hasleader: true" so that it ends with etcd's "etcdserver: no
// leader" (Unavailable) when its member loses its leader for long enough
// (member::NoLeaderMonitor), as etcd's stream interceptor cancels such streams.
std::unique_ptr<StreamCall> CancelOnLeaderLoss(member::EtcdServer& server,
                                               std::unique_ptr<StreamCall> call,
                                               const std::shared_ptr<StreamSink>& sink);

class MethodTable {
 public:
  using Unary =
      std::function<void(const CallContext& ctx, std::string_view payload, Answer answer)>;
  // Opens a stream (headers received); may end it at once through the sink.
  using OpenStream = std::function<std::unique_ptr<StreamCall>(const CallContext& ctx,
                                                               std::shared_ptr<StreamSink> sink)>;

  // Whether the client streams too (Watch, LeaseKeepAlive) or only the server (Snapshot).
  enum class StreamKind { kServer, kBidi };

  // Adds a streaming method. As etcd's stream interceptor does for every stream, RefuseStream
  // may end a stream at its start; otherwise `make(sink)` (or `make(ctx, sink)`) opens the call.
  // Its calls, messages and ends are counted for /metrics.
  template <typename Make>
  void AddStream(member::EtcdServer& server, std::string path, StreamKind kind, Make make) {
    const CallStats stats{
        &server.metrics().Method(path, kind == StreamKind::kBidi ? "bidi_stream" : "server_stream"),
        &server.metrics()};
    streams_[std::move(path)] =
        [&server, make, stats](const CallContext& ctx,
                               std::shared_ptr<StreamSink> sink) -> std::unique_ptr<StreamCall> {
      stats.method->started.Add();
      auto counted = std::make_shared<CountingSink>(std::move(sink), stats);
      if (auto refused = RefuseStream(server, ctx)) {
        counted->Finish(*refused);
        return nullptr;
      }
      std::unique_ptr<StreamCall> call;
      if constexpr (std::is_invocable_v<Make, const CallContext&, std::shared_ptr<StreamSink>>) {
        call = make(ctx, counted);
      } else {
        call = make(counted);
      }
      if (!call) return nullptr;
      if (ctx.require_leader) call = CancelOnLeaderLoss(server, std::move(call), counted);
      return std::make_unique<CountingCall>(std::move(call), std::move(counted), stats);
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

  // Adds a unary method served by `call` (etcd's Reply convention): called as
  // `call(req, reply)`, or `call(ctx, req, reply)` when it takes the caller's CallContext. The
  // response's header is
  // filled from `server` (member, revision, term) when the call succeeds, as etcd does.
  // What a successful answer's header carries: member, revision and term (most calls); no
  // revision (the Cluster service, as etcd's); none at all (Alarm, Defragment, MoveLeader, as
  // etcd's); or what the call put there itself (Status).
  enum class Header { kFull, kCluster, kNone, kAsAnswered };

  template <typename Req, typename Resp, typename Call>
  void AddUnary(member::EtcdServer& server, std::string path, Call call,
                Header header = Header::kFull) {
    const CallStats stats{&server.metrics().Method(path, "unary"), &server.metrics()};
    unary_[std::move(path)] = {
        [&server, call, header](const CallContext& ctx, std::string_view payload, Answer answer) {
          // The request lives until its answer: some calls (ranges) read it after they return.
          auto req = std::make_shared<Req>();
          if (Status st = ParseRequest(payload, req.get()); !st.ok()) return answer(st, {});
          member::Reply<Resp> reply = [&server, req, header,
                                       answer = std::move(answer)](Result<Resp> r) {
            if (!r.ok()) return answer(r.status(), {});
            if constexpr (requires { r->mutable_header(); }) {  // etcd's messages, not others'
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
            }
            answer(Status::Ok(), FrameMessage(*r));
          };
          auto dispatch = [call, req, reply = std::move(reply)](const CallContext& ctx) {
            if constexpr (std::is_invocable_v<Call, const CallContext&, const Req&,
                                              member::Reply<Resp>>) {
              call(ctx, *req, reply);
            } else {
              call(*req, reply);
            }
          };
          // A token from an entry not applied here yet is waited for, as etcd waits.
          if (ctx.token && server.TokenEntryPending(*ctx.token)) {
            return server.WaitForTokenEntry(
                [ctx, dispatch = std::move(dispatch)] { dispatch(ctx); });
          }
          dispatch(ctx);
        },
        stats};
  }

  // Adds a unary method served by EtcdServer's `call`, refused on a learner as etcd refuses
  // every request there except Status and serializable ranges, and when the caller lacks the
  // `identity` the method requires.
  template <typename Req, typename Resp>
  void AddRefusedOnLearner(member::EtcdServer& server, std::string path,
                           void (member::EtcdServer::*call)(const Req&, member::Reply<Resp>),
                           Header header = Header::kFull, Identity identity = Identity::kNone) {
    AddUnary<Req, Resp>(
        server, std::move(path),
        [&server, call, identity](const CallContext& ctx, const Req& r, member::Reply<Resp> done) {
          if (server.IsLearner()) return done(errors::NotSupportedForLearner());
          if (Status st = CheckIdentity(server, ctx, identity); !st.ok()) return done(st);
          (server.*call)(r, std::move(done));
        },
        header);
  }
  // The same for a call the member serves as its caller (CallerOf): the member checks the
  // caller's permissions when it serves or applies the request.
  template <typename Req, typename Resp>
  void AddAsCaller(member::EtcdServer& server, std::string path,
                   void (member::EtcdServer::*call)(const Req&, member::Reply<Resp>,
                                                    member::EtcdServer::Who),
                   Header header = Header::kFull) {
    AddUnary<Req, Resp>(
        server, std::move(path),
        [&server, call](const CallContext& ctx, const Req& r, member::Reply<Resp> done) {
          if (server.IsLearner()) return done(errors::NotSupportedForLearner());
          auto who = CallerOf(server, ctx);
          if (!who.ok()) return done(who.status());
          (server.*call)(r, std::move(done), *who);
        },
        header);
  }

  // A unary method: the call, and its counters (the caller counts: OnRequest, where the call
  // starts and its answer is taken).
  struct UnaryMethod {
    Unary call;
    CallStats stats;
  };
  // nullptr when no method has this path.
  const UnaryMethod* Find(const std::string& path) const {
    auto it = unary_.find(path);
    return it == unary_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<std::string, UnaryMethod> unary_;
  std::unordered_map<std::string, OpenStream> streams_;
};

// grpc-go's answer for a path ("/etcdserverpb.KV/Put") no method has (event_loop.cc).
Status UnknownMethod(const MethodTable& methods, const std::string& path);

// etcdserverpb.KV: Range, Put, DeleteRange, Txn, Compact (kv_methods.cc).
void AddKvMethods(MethodTable& table, member::EtcdServer& server);
// etcdserverpb.Cluster: MemberAdd, MemberRemove, MemberUpdate, MemberList, MemberPromote
// (cluster_methods.cc).
void AddClusterMethods(MethodTable& table, member::EtcdServer& server);
// etcdserverpb.Lease: LeaseGrant, LeaseRevoke, LeaseKeepAlive, LeaseTimeToLive, LeaseLeases
// (lease_methods.cc).
void AddLeaseMethods(MethodTable& table, member::EtcdServer& server);

// etcdserverpb.Maintenance: Alarm, Status, Defragment, Hash, HashKV, Snapshot, MoveLeader
// (maintenance_methods.cc).
void AddMaintenanceMethods(MethodTable& table, member::EtcdServer& server);
// etcdserverpb.Watch: Watch (watch_methods.cc).
void AddWatchMethods(MethodTable& table, member::EtcdServer& server);
// etcdserverpb.Auth: every call of etcd's Auth service (auth_methods.cc).
void AddAuthMethods(MethodTable& table, member::EtcdServer& server);
// grpc.health.v1.Health: Check, Watch (health_methods.cc).
void AddHealthMethods(MethodTable& table, member::EtcdServer& server);

}  // namespace etcdw::client_api

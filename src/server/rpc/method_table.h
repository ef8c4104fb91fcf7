// The calls the native server answers, by HTTP/2 path ("/etcdserverpb.KV/Put"), each a
// function from the request's message bytes to one answer.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "etcdw/common/status.h"
#include "etcdw/server/etcd_server.h"
#include "grpc_wire.h"

namespace etcdw::server::rpc {

// Completes one call: OK with the framed response message, or an error (`framed` unused).
// Called exactly once, from any thread.
using Answer = std::function<void(const Status& st, std::string framed)>;

class MethodTable {
 public:
  using Unary = std::function<void(std::string_view payload, Answer answer)>;

  // Adds a unary method served by `call` (etcd's Reply convention). The response's header is
  // filled from `server` (member, revision, term) when the call succeeds, as etcd does.
  template <typename Req, typename Resp>
  void AddUnary(EtcdServer& server, std::string path,
                std::function<void(const Req&, Reply<Resp>)> call) {
    unary_[std::move(path)] = [&server, call](std::string_view payload, Answer answer) {
      // The request lives until its answer: some calls (ranges) read it after they return.
      auto req = std::make_shared<Req>();
      if (Status st = ParseRequest(payload, req.get()); !st.ok()) return answer(st, {});
      call(*req, [&server, req, answer = std::move(answer)](Result<Resp> r) {
        if (!r.ok()) return answer(r.status(), {});
        server.FillHeader(r->mutable_header());
        answer(Status::Ok(), FrameMessage(*r));
      });
    };
  }

  // nullptr when no method has this path.
  const Unary* Find(const std::string& path) const {
    auto it = unary_.find(path);
    return it == unary_.end() ? nullptr : &it->second;
  }

 private:
  std::unordered_map<std::string, Unary> unary_;
};

// etcdserverpb.KV: Range, Put, DeleteRange, Txn, Compact (kv_methods.cc).
void AddKvMethods(MethodTable& table, EtcdServer& server);

}  // namespace etcdw::server::rpc

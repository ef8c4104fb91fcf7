// Helpers of the cluster end-to-end tests: per-member reads and status (waiting for conditions:
// WaitUntil, support/await.h).
#pragma once

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "servers.h"

namespace etcdw::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A serializable read on one member (what that member has applied).
inline std::optional<std::string> LocalValue(Member& m, const std::string& key) {
  etcdserverpb::RangeRequest r;
  r.set_key(key);
  r.set_serializable(true);
  etcdserverpb::RangeResponse resp;
  if (!m.client().kv->Range(Ctx(seconds(2)).get(), r, &resp).ok() || resp.kvs_size() == 0) {
    return std::nullopt;
  }
  return resp.kvs(0).value();
}

inline etcdserverpb::StatusResponse StatusOf(Member& m) {
  etcdserverpb::StatusRequest req;
  etcdserverpb::StatusResponse resp;
  (void)m.client().maintenance->Status(Ctx(seconds(2)).get(), req, &resp);
  return resp;
}

// A put through `m` retried until it succeeds (a cluster may be electing a leader).
inline bool PutEventually(Member& m, const std::string& k, const std::string& v,
                          milliseconds timeout = seconds(20)) {
  return WaitUntil(
      [&] {
        etcdserverpb::PutRequest r;
        r.set_key(k);
        r.set_value(v);
        etcdserverpb::PutResponse resp;
        return m.client().kv->Put(Ctx(seconds(3)).get(), r, &resp).ok();
      },
      timeout);
}

// A member ID as etcdctl takes it (hexadecimal).
inline std::string IdHex(uint64_t id) {
  char hex[20];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(id));
  return hex;
}

inline void DumpLogs(const TestCluster& c) { std::cerr << c.LogTails(); }

}  // namespace etcdw::testing

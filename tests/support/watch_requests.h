// Watch requests for tests that drive Watch streams (the diff suite, the client API's stream
// tests, the command-line tests). Header-only.
#pragma once

#include <cstdint>
#include <string>

#include "etcd/etcdserverpb/rpc.pb.h"

namespace etcdw::testsupport {

inline etcdserverpb::WatchRequest CreateWatch(const std::string& key, const std::string& end = "",
                                              int64_t start_rev = 0, bool prev_kv = false,
                                              int64_t watch_id = 0) {
  etcdserverpb::WatchRequest req;
  auto* c = req.mutable_create_request();
  c->set_key(key);
  c->set_range_end(end);
  c->set_start_revision(start_rev);
  c->set_prev_kv(prev_kv);
  c->set_watch_id(watch_id);
  return req;
}

inline etcdserverpb::WatchRequest CancelWatch(int64_t watch_id) {
  etcdserverpb::WatchRequest req;
  req.mutable_cancel_request()->set_watch_id(watch_id);
  return req;
}

inline etcdserverpb::WatchRequest ProgressRequest() {
  etcdserverpb::WatchRequest req;
  req.mutable_progress_request();
  return req;
}

}  // namespace etcdw::testsupport

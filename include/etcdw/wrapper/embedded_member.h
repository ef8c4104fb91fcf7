// The embedded store as the wrapper runs it: open the data directory and start Raft, serve
// clients once the member has published itself to the cluster (as etcd), and stop gracefully.
#pragma once

#include <chrono>
#include <memory>

#include "etcdw/client_api/native_rpc_server.h"
#include "etcdw/common/config.h"
#include "etcdw/common/status.h"
#include "etcdw/common/stop.h"
#include "etcdw/member/etcd_server.h"

namespace etcdw::wrapper {

class EmbeddedMember {
 public:
  // Opens the store and starts Raft: from here on the member takes part in the cluster. A
  // fatal error of the store later requests a stop with exit code 1 through `stop`.
  static Result<std::unique_ptr<EmbeddedMember>> Start(const common::EtcdConfig& config,
                                                       common::StopRequest* stop);
  ~EmbeddedMember();  // Stop(false) if still running

  // Waits until the member has published itself (needs a quorum), then serves clients.
  // Returns false when a stop was requested first. `warn_after` (0: never) logs an error when
  // the wait takes longer, and the wait goes on (gardener's --etcd-ready-timeout never aborts).
  Result<bool> ServeWhenPublished(const common::StopRequest& stop,
                                  std::chrono::milliseconds warn_after);

  // Graceful: a leader hands leadership to another voter first; in-flight client calls get
  // two seconds; accepted proposals are drained. Idempotent.
  void Stop(bool graceful);

 private:
  EmbeddedMember() = default;
  common::EtcdConfig config_;
  std::unique_ptr<member::EtcdServer> server_;
  std::unique_ptr<client_api::NativeRpcServer> native_;
};

}  // namespace etcdw::wrapper

// The embedded store as the wrapper runs it: open the data directory and start Raft, serve
// clients once the member has published itself to the cluster (as etcd), and stop gracefully.
#pragma once

#include <chrono>
#include <memory>

#include "etcdw/common/config.h"
#include "etcdw/common/status.h"
#include "etcdw/server/etcd_server.h"
#include "etcdw/server/native_rpc_server.h"
#include "etcdw/wrapper/stop.h"

namespace etcdw::wrapper {

class EmbeddedMember {
 public:
  // Opens the store and starts Raft: from here on the member takes part in the cluster. A
  // fatal error of the store later requests a stop with exit code 1 through `stop`.
  static Result<std::unique_ptr<EmbeddedMember>> Start(const common::EtcdConfig& config,
                                                       StopRequest* stop);
  ~EmbeddedMember();  // Stop(false) if still running

  // Waits until the member has published itself (needs a quorum), then serves clients.
  // Returns false when a stop was requested first. `warn_after` (0: never) logs an error when
  // the wait takes longer, and the wait goes on (gardener's --etcd-ready-timeout never aborts).
  Result<bool> ServeWhenPublished(const StopRequest& stop, std::chrono::milliseconds warn_after);

  // Graceful: a leader hands leadership to another voter first; in-flight client calls get
  // two seconds; accepted proposals are drained. Idempotent.
  void Stop(bool graceful);

 private:
  EmbeddedMember() = default;
  common::EtcdConfig config_;
  std::unique_ptr<server::EtcdServer> server_;
  std::unique_ptr<server::NativeRpcServer> native_;
};

}  // namespace etcdw::wrapper

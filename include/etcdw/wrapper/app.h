// The two ways to run etcd-wrapper, each returning the process exit code:
//   start-etcd  bootstrap through the backup-restore sidecar, then run the store (the pod)
//   --config    run the store from a local etcd config file, without a sidecar
#pragma once

#include <chrono>
#include <string>

#include "etcdw/wrapper/options.h"

namespace etcdw::wrapper {

// Options are already validated (ValidateStartEtcdOptions). Stop signals must be blocked in
// every thread (BlockStopSignals) before this is called.
int RunStartEtcd(const StartEtcdOptions& options);

struct LocalOptions {
  std::string config_file;
  std::string log_level;       // overrides the config's log-level when set
  std::string exit_code_file;  // empty: none
  int wrapper_port = 0;        // 0: no /readyz server
};
int RunLocal(const LocalOptions& options);

}  // namespace etcdw::wrapper

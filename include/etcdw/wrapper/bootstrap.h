// Bootstrap against the sidecar: the initialisation loop and the config fetch.
#pragma once

#include <chrono>
#include <string>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"
#include "etcdw/common/stop.h"
#include "etcdw/wrapper/sidecar_client.h"

namespace etcdw::wrapper {

struct BootstrapOptions {
  // Waits, backoff and the overall timeout are measured on it.
  const common::Clock* clock = &common::SystemClock::Instance();
  std::string exit_code_file;
  std::chrono::milliseconds poll_interval{1000};
  // While the sidecar cannot be reached the wait between attempts doubles up to this cap.
  std::chrono::milliseconds max_backoff{4000};
  std::chrono::milliseconds timeout{0};  // 0: no overall limit
  int config_attempts = 5;
  std::chrono::milliseconds config_retry_interval{1000};
};

// Polls the status until the sidecar reports Successful, triggering initialisation (in the
// mode chosen from the exit-code file, re-read at every trigger) whenever it reports New:
// first at start, and again after a Failed (which the sidecar resets to New). Returns at once
// on Successful (gardener sleeps another second). Errors: a kCanceled status when `stop` was
// requested, kDeadlineExceeded after options.timeout.
Status RunInitialization(SidecarClient& sidecar, const BootstrapOptions& options,
                         const common::StopRequest& stop);

// GET /config with up to options.config_attempts attempts, options.config_retry_interval apart.
Result<std::string> FetchConfig(SidecarClient& sidecar, const BootstrapOptions& options,
                                const common::StopRequest& stop);

}  // namespace etcdw::wrapper

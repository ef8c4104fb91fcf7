// Readiness as gardener's etcd-wrapper defines it: a linearizable Range of the key "foo"
// through the member's client endpoint succeeds (a leader is known, a quorum confirms the read
// index, the member is not a learner, the client certificate is accepted).
//
// Unlike gardener's (a check every 2 s, a stuck check keeps the last verdict for up to 5 s),
// a check runs every `interval`, and a check still pending after `interval` already counts as
// not ready: a member that loses quorum turns not ready within about one interval.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "etcdw/common/clock.h"
#include "etcdw/common/status.h"

namespace etcdw::wrapper {

struct ReadinessOptions {
  // The interval between checks and how long a pending check may take are measured on it.
  const common::Clock* clock = &common::SystemClock::Instance();
  std::string endpoint;  // host:port of the client endpoint
  bool tls = false;
  std::string ca_file;      // verifies the server (required with tls)
  std::string server_name;  // checked against the server certificate (empty: the host)
  std::string cert_file;    // client certificate, optional
  std::string key_file;
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds check_timeout{5000};
};

class ReadinessProbe {
 public:
  // Reads the TLS files (errors name them) and starts checking on a background thread.
  static Result<std::unique_ptr<ReadinessProbe>> Start(const ReadinessOptions& options);
  ~ReadinessProbe();  // stops the thread

  bool Ready() const;

  class Impl;

 private:
  ReadinessProbe() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace etcdw::wrapper

// The calls the wrapper makes to the backup-restore sidecar (gardener's protocol):
//   GET /initialization/status        -> "New" | "Progress" | "Successful" | "Failed"
//   GET /initialization/start?mode=M  -> starts validation (and restoration) in mode M
//   GET /config                       -> the etcd configuration (YAML) for this member
// over HTTP, or HTTPS verified against the configured CA bundle. Only 200, 201 and 202 count
// as success.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "etcdw/common/http.h"
#include "etcdw/common/status.h"
#include "etcdw/wrapper/exit_code.h"
#include "etcdw/wrapper/options.h"

namespace etcdw::wrapper {

// The sidecar's initialisation state as the wrapper sees it.
enum class InitState { kNew, kInProgress, kSuccessful, kFailed };
// "New" and "Successful" exactly (no trimming, as gardener); "Failed" is reported as kFailed
// only for logging (the sidecar resets to New right after); any other body is in progress.
InitState ParseInitState(const std::string& body);
const char* InitStateName(InitState s);

class SidecarClient {
 public:
  // Loads the CA bundle for TLS; errors name the file.
  static Result<std::unique_ptr<SidecarClient>> Create(const StartEtcdOptions& options);

  // Each call gives up when `cancel` becomes true. Errors say which call failed and why,
  // including the HTTP status and the start of the body for a non-2xx answer.
  Result<InitState> InitializationStatus(const std::atomic<bool>* cancel);
  Status StartInitialization(ValidationMode mode, const std::atomic<bool>* cancel);
  Result<std::string> Config(const std::atomic<bool>* cancel);

 private:
  SidecarClient() = default;
  Result<std::string> Get(common::HttpClient& client, const std::string& target,
                          const std::atomic<bool>* cancel);
  std::string host_port_;
  std::string base_url_;
  std::unique_ptr<common::HttpClient> quick_;  // status and start: 10 s per request
  std::unique_ptr<common::HttpClient> slow_;   // config: 60 s (the sidecar lists members)
};

}  // namespace etcdw::wrapper

// An in-process stand-in for the backup-restore sidecar's HTTP API, as the wrapper sees it:
// the initialisation state machine of gardener's etcd-backup-restore (New -> Progress ->
// Successful | Failed, a final state served once and then reset to New) driven by a script of
// outcomes, and /config serving a given body. Every call is recorded.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "etcdw/common/http.h"

namespace etcdw::testing {

class FakeSidecar {
 public:
  // What one triggered initialisation does: report Progress on this many status polls, then
  // the result ("Successful" or "Failed").
  struct Outcome {
    int progress_polls = 1;
    std::string result = "Successful";
  };

  // Listens on 127.0.0.1:port (0: any); HTTPS when cert and key are given.
  bool Start(int port, const std::string& cert_file = "", const std::string& key_file = "");
  void Stop();
  int port() const { return http_ ? http_->port() : -1; }

  // Queue outcomes for the next triggers (a trigger without a queued outcome succeeds).
  void AddOutcome(Outcome o);
  void SetConfig(int status, std::string body);
  // Answer status polls with this HTTP status and no state (recorded as "status:HTTP <n>");
  // 0 restores the normal answers.
  void SetStatusFailure(int http_status);

  // "status:New", "start:full", "config", ... in call order.
  std::vector<std::string> calls() const;
  // calls() with runs of the same entry collapsed to one.
  std::vector<std::string> CollapsedCalls() const;
  // The modes of the start calls, in order.
  std::vector<std::string> StartModes() const;

 private:
  common::HttpResponse Handle(const common::HttpRequest& r);

  mutable std::mutex mu_;
  std::unique_ptr<common::HttpServer> http_;
  std::string state_ = "New";
  int progress_left_ = 0;
  std::string pending_result_;
  std::deque<Outcome> outcomes_;
  int status_failure_ = 0;
  int config_status_ = 200;
  std::string config_body_;
  std::vector<std::string> calls_;
};

}  // namespace etcdw::testing

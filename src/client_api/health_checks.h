// etcd's health endpoints: /health (etcd 3.4's body, with 3.4's ?exclude=<alarm> and 3.5's
// ?serializable=true), and etcd 3.5's /livez and /readyz (named checks, ?verbose, ?exclude=<check>,
// /livez/<check> and /readyz/<check>). They look at the member through a HealthProbe, so that
// their logic is tested against a fake one (a learner, a member without leader).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/status.h"

namespace etcdw::member {
class EtcdServer;
}

namespace etcdw::client_api {

// What the health checks ask of the member.
class HealthProbe {
 public:
  virtual ~HealthProbe() = default;
  // The alarms raised in the cluster.
  virtual std::vector<etcdserverpb::AlarmType> Alarms() = 0;
  virtual bool HasLeader() = 0;
  virtual bool IsLearner() = 0;
  // A keys-only range of at most one key, serializable or linearizable (which needs a quorum and
  // fails after the request timeout without one); `done` is called once, from any thread.
  virtual void Read(bool serializable, std::function<void(Status)> done) = 0;
  // Counts a /health answer for /metrics (etcd_server_health_success / _failures).
  virtual void CountHealth(bool /*healthy*/) {}
};

// The probe of a running member.
std::unique_ptr<HealthProbe> MemberHealthProbe(member::EtcdServer& server);

// A URL's query ("a=1&verbose&exclude=x") split at '&' and '=' and percent-decoded, as Go's
// url.ParseQuery: pairs in their order; a key without '=' has an empty value.
std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query);

// What a health endpoint answers: 200 or 503 and a body. `plain` says the handler set etcd's
// text headers (Content-Type text/plain and X-Content-Type-Options: nosniff, as http.Error and the
// /livez handlers do); otherwise Go sniffs the type from the body (/health's 200).
struct HealthAnswer {
  int code = 200;
  std::string body;
  bool plain = true;
};

// Whether `path` is one of the health endpoints (/health, /livez, /readyz, /livez/<check>,
// /readyz/<check>), which answer GET only.
bool IsHealthPath(std::string_view path);

// Runs the endpoint `path` (IsHealthPath) with the URL's `query`; `done` is called once, from
// any thread. The checks run one after the other, in etcd's order of registration.
void RunHealthEndpoint(std::shared_ptr<HealthProbe> probe, std::string_view path,
                       std::string_view query, std::function<void(HealthAnswer)> done);

}  // namespace etcdw::client_api

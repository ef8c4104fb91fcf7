#include "health_checks.h"

#include <memory>
#include <set>

#include "etcdw/member/etcd_server.h"

namespace etcdw::client_api {

namespace {

class MemberProbe : public HealthProbe {
 public:
  explicit MemberProbe(member::EtcdServer& s) : s_(s) {}
  std::vector<etcdserverpb::AlarmType> Alarms() override {
    std::vector<etcdserverpb::AlarmType> out;
    for (const auto& a : s_.Alarms()) out.push_back(a.alarm());
    return out;
  }
  bool HasLeader() override { return s_.StatusInfo().leader() != 0; }
  bool IsLearner() override { return s_.IsLearner(); }
  void Read(bool serializable, std::function<void(Status)> done) override {
    // The request lives until its answer (a range reads it after it returns).
    // etcd reads the empty key, which our Range refuses (etcd refuses it before its Range).
    auto req = std::make_shared<etcdserverpb::RangeRequest>();
    req->set_key("health");
    req->set_keys_only(true);
    req->set_limit(1);
    req->set_serializable(serializable);
    s_.Range(*req, [req, done = std::move(done)](Result<etcdserverpb::RangeResponse> r) {
      done(r.ok() ? Status::Ok() : r.status());
    });
  }
  void CountHealth(bool healthy) override {
    (healthy ? s_.metrics().health_ok : s_.metrics().health_failed).Add();
  }

 private:
  member::EtcdServer& s_;
};

// Go's url.QueryUnescape: '+' is a space, %XX a byte; nullopt for a malformed escape.
std::optional<std::string> Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] != '%') {
      out += s[i];
    } else {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      if (i + 2 >= s.size()) return std::nullopt;
      const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
  }
  return out;
}

// A named check: `done` gets "" when it passes, else why it failed.
using Check = std::function<void(std::function<void(std::string)> done)>;
struct NamedCheck {
  std::string name;
  Check run;
};

Check ReadCheck(const std::shared_ptr<HealthProbe>& probe, bool serializable) {
  return [probe, serializable](std::function<void(std::string)> done) {
    probe->Read(serializable,
                [done = std::move(done)](const Status& st) { done(st.ok() ? "" : st.message()); });
  };
}

// etcd 3.5's checks of /livez or /readyz ("livez", "readyz"), in their order of registration.
// (etcd keeps them in a Go map, so its verbose lines come in any order; ours are stable.)
std::vector<NamedCheck> Checks(const std::shared_ptr<HealthProbe>& probe, std::string_view kind) {
  std::vector<NamedCheck> checks;
  if (kind == "readyz") {
    checks.push_back({"data_corruption", [probe](std::function<void(std::string)> done) {
                        for (auto a : probe->Alarms()) {
                          if (a == etcdserverpb::CORRUPT) return done("alarm activated: CORRUPT");
                        }
                        done("");
                      }});
  }
  checks.push_back({"serializable_read", ReadCheck(probe, true)});
  if (kind == "readyz") {
    checks.push_back({"linearizable_read", ReadCheck(probe, false)});
    checks.push_back({"non_learner", [probe](std::function<void(std::string)> done) {
                        done(probe->IsLearner() ? "not supported for learner" : "");
                      }});
  }
  return checks;
}

// Runs checks[i..] one after the other, appending etcd's "[+]name ok" / "[-]name failed: why"
// lines to `report`; `done(all_passed, report)` at the end.
void RunFrom(std::shared_ptr<std::vector<NamedCheck>> checks, size_t i, bool passed,
             std::string report, std::function<void(bool, std::string)> done) {
  if (i == checks->size()) return done(passed, std::move(report));
  const NamedCheck& c = (*checks)[i];
  c.run([checks, i, passed, report = std::move(report),
         done = std::move(done)](const std::string& why) mutable {
    const std::string& name = (*checks)[i].name;
    report += why.empty() ? "[+]" + name + " ok\n" : "[-]" + name + " failed: " + why + "\n";
    RunFrom(std::move(checks), i + 1, passed && why.empty(), std::move(report), std::move(done));
  });
}

bool Has(const std::vector<std::pair<std::string, std::string>>& q, std::string_view key) {
  for (const auto& [k, v] : q) {
    if (k == key) return true;
  }
  return false;
}

// Values of `key`, empty ones left out (etcd's getQuerySet).
std::set<std::string> ValuesOf(const std::vector<std::pair<std::string, std::string>>& q,
                               std::string_view key) {
  std::set<std::string> out;
  for (const auto& [k, v] : q) {
    if (k == key && !v.empty()) out.insert(v);
  }
  return out;
}

// /health: alarms not excluded, then a leader (unless serializable), then a read. The body is
// etcd 3.4's ({"health":"true"}); 3.5 adds a "reason" field, which we do not write.
void Health(std::shared_ptr<HealthProbe> probe,
            const std::vector<std::pair<std::string, std::string>>& q,
            std::function<void(HealthAnswer)> done) {
  auto answer = [probe, done = std::move(done)](bool healthy) {
    probe->CountHealth(healthy);
    // http.Error's body ends in a newline; the 200 is written as it is and sniffed.
    if (healthy) return done({200, R"({"health":"true"})", /*plain=*/false});
    done({503, "{\"health\":\"false\"}\n", /*plain=*/true});
  };
  const std::set<std::string> excluded = ValuesOf(q, "exclude");
  for (auto a : probe->Alarms()) {
    if (!excluded.contains(etcdserverpb::AlarmType_Name(a))) return answer(false);
  }
  // Go's Query().Get: the first value.
  bool serializable = false;
  for (const auto& [k, v] : q) {
    if (k == "serializable") {
      serializable = v == "true";
      break;
    }
  }
  if (!serializable && !probe->HasLeader()) return answer(false);
  probe->Read(serializable, [answer](const Status& st) { answer(st.ok()); });
}

}  // namespace

std::unique_ptr<HealthProbe> MemberHealthProbe(member::EtcdServer& server) {
  return std::make_unique<MemberProbe>(server);
}

std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    // Go 1.17 and later refuse a semicolon in a query pair (the pair is dropped).
    if (part.empty() || part.find(';') != std::string_view::npos) continue;
    const size_t eq = part.find('=');
    auto key = Unescape(part.substr(0, eq));
    auto value = Unescape(eq == std::string_view::npos ? "" : part.substr(eq + 1));
    if (key && value) out.emplace_back(std::move(*key), std::move(*value));
  }
  return out;
}

bool IsHealthPath(std::string_view path) {
  if (path == "/health" || path == "/livez" || path == "/readyz") return true;
  for (std::string_view kind : {"livez", "readyz"}) {
    const std::string prefix = "/" + std::string(kind) + "/";
    if (path.substr(0, prefix.size()) != prefix) continue;
    for (const auto& c : Checks(nullptr, kind)) {
      if (path.substr(prefix.size()) == c.name) return true;
    }
  }
  return false;
}

void RunHealthEndpoint(std::shared_ptr<HealthProbe> probe, std::string_view path,
                       std::string_view query, std::function<void(HealthAnswer)> done) {
  const auto q = ParseQuery(query);
  if (path == "/health") return Health(std::move(probe), q, std::move(done));
  const size_t slash = path.find('/', 1);
  const std::string kind(path.substr(1, slash == std::string_view::npos ? slash : slash - 1));
  auto checks = std::make_shared<std::vector<NamedCheck>>();
  if (slash != std::string_view::npos) {  // /livez/<check>: that check alone, exclude ignored
    for (auto& c : Checks(probe, kind)) {
      if (c.name == path.substr(slash + 1)) checks->push_back(std::move(c));
    }
  } else {
    // Excluding a check that does not exist fails nothing (etcd only logs it).
    const std::set<std::string> excluded = ValuesOf(q, "exclude");
    for (auto& c : Checks(probe, kind)) {
      if (!excluded.contains(c.name)) checks->push_back(std::move(c));
    }
  }
  const bool verbose = Has(q, "verbose");
  RunFrom(std::move(checks), 0, true, "",
          [verbose, done = std::move(done)](bool passed, std::string report) {
            // A failure always tells every check (http.Error adds a newline); success only
            // when asked (?verbose), then "ok".
            if (!passed) return done({503, report + "\n", true});
            done({200, (verbose ? report : "") + "ok\n", true});
          });
}

}  // namespace etcdw::client_api

// Drives the sidecar's HTTP API (HttpApi::Handle) with requests as its HTTP server hands them
// over: any method, a path and query string split by the server's own SplitTarget, headers with
// lower-case names and a body, on every route (/initialization/start and /status, /healthz,
// /metrics, /config, /snapshot/full, /delta and /latest) and on any other path. The API's pieces
// are in memory: a store listing the input's object keys (parsed by ParseSnapshotKey and sorted,
// as every SnapStore lists), a snapshotter answering from the input, an initialisation that
// waits for the input to let it finish, and a leader lookup that never reaches a host outside
// the machine (none, an error, a closed loopback port, or an address ParseUrl refuses).
// Beyond not crashing (Handle never throws: the HTTP server would answer 500 for a bug), it
// checks that:
// - every answer has a status of 100 to 599, and an answer of type application/json a body
//   that parses as JSON;
// - a path that is no route is 404 "404 page not found" (so is /metrics without metrics);
//   no route restricts the method (gardener's routes do not): a request answers as the same
//   request by GET, and a request without side effects answers the same when repeated;
// - /healthz is 200 {"health":true} exactly while healthy, else 503 {"health":false};
// - /initialization/start is 200 and empty, starts initialisation only in state New (with mode
//   sanity exactly for mode=sanity) and makes the sidecar unhealthy; /initialization/status
//   names the state, and after naming Successful or Failed the state is New again;
// - /config is the rendered configuration as application/yaml, or 500 with the error's message;
// - without a store every snapshot route is 405; /snapshot/latest lists the store: 500 with its
//   error, or the newest full snapshot and the deltas after it (chunks skipped), in order, and
//   the metrics' latest-delta gauge counts them;
// - on the backup leader, a value of final that is no Go bool is 400 naming it and triggers
//   nothing; otherwise the snapshot taken is answered as JSON (its name, its final flag), delta
//   without events as null, and a failed trigger as 500 with its message;
// - on a follower, a request already delegated is 405 without looking the leader up, and a
//   leader that cannot be reached is 405.
// Input: byte 0 the setup (bit 0 a store, bit 1 its listing fails, bit 2 metrics, bits 3-4 the
// leader lookup, bit 5 the configuration fails to render, bit 6 initialisation fails, bit 7
// starts healthy), byte 1 the number of listed keys (% 8), each key a length byte and its
// bytes, then requests and actions to the end (see Program).
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/http_util.h"
#include "etcdw/common/http.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/sidecar/http_api.h"
#include "etcdw/sidecar/metrics.h"
#include "etcdw/sidecar/snap_store.h"
#include "etcdw/sidecar/snapshot.h"
#include "etcdw/sidecar/snapshot_triggers.h"
#include "input_reader.h"

namespace {

namespace sc = etcdw::sidecar;
using etcdw::Result;
using etcdw::Status;
using etcdw::common::HttpRequest;
using etcdw::common::HttpResponse;
using etcdw::fuzz::InputReader;

[[noreturn]] void Fail(const std::string& what, const HttpRequest* req = nullptr,
                       const HttpResponse* resp = nullptr) {
  std::fprintf(stderr, "sidecar_http_api_fuzzer: %s\n", what.c_str());
  if (req != nullptr) {
    std::fprintf(stderr, "  request: %s %s\n", req->method.c_str(), req->target.c_str());
  }
  if (resp != nullptr) {
    std::fprintf(stderr, "  answer: %d %s\n", resp->status, resp->body.c_str());
  }
  std::abort();
}

// A store listing the input's keys as the stores list: each key parsed by ParseSnapshotKey
// (the ones it refuses skipped), sorted by SortSnapshots. Nothing is fetched, saved or deleted.
class ListedStore final : public sc::SnapStore {
 public:
  ListedStore(const std::vector<std::string>& keys, bool fails) : fails_(fails) {
    for (const std::string& key : keys) {
      Result<sc::SnapshotInfo> s = sc::ParseSnapshotKey(key);
      if (s.ok()) list_.push_back(std::move(s).value());
    }
    sc::SortSnapshots(list_);
  }
  Result<std::vector<sc::SnapshotInfo>> List() override {
    if (fails_) return etcdw::Unavailable("the store cannot be listed");
    return list_;
  }
  Status Fetch(const sc::SnapshotInfo&, const std::string&) override { Fail("Fetch called"); }
  Status Save(const sc::SnapshotInfo&, const std::string&) override { Fail("Save called"); }
  Status Delete(const sc::SnapshotInfo&) override { Fail("Delete called"); }
  std::string Describe() const override { return "listed store"; }
  const std::vector<sc::SnapshotInfo>& list() const { return list_; }

 private:
  std::vector<sc::SnapshotInfo> list_;
  bool fails_;
};

// The backup leader's snapshotter, answering each trigger from the input: a failure, or a
// snapshot named as the snapshotter names them (NewSnapshot) of a revision and time read there.
class InputTriggers final : public sc::SnapshotTriggers {
 public:
  explicit InputTriggers(InputReader& in) : in_(in) {}
  Result<sc::SnapshotInfo> TriggerFull(bool final) override {
    ++calls_;
    last_final_ = final;
    if (in_.Byte() % 4 == 0) return etcdw::FailedPrecondition("the snapshotter is not running");
    last_ = Taken(sc::SnapshotKind::kFull, final);
    return *last_;
  }
  Result<std::optional<sc::SnapshotInfo>> TriggerDelta() override {
    ++calls_;
    switch (in_.Byte() % 4) {
      case 0:
        return etcdw::FailedPrecondition("delta snapshots are off");
      case 1:
        last_ = std::nullopt;
        return std::optional<sc::SnapshotInfo>();
      default:
        last_ = Taken(sc::SnapshotKind::kIncr, false);
        return std::optional<sc::SnapshotInfo>(*last_);
    }
  }
  int calls() const { return calls_; }
  bool last_final() const { return last_final_; }
  // The snapshot of the last successful trigger (none for a delta without events).
  const std::optional<sc::SnapshotInfo>& last() const { return last_; }

 private:
  sc::SnapshotInfo Taken(sc::SnapshotKind kind, bool final) {
    static constexpr std::string_view kSuffixes[] = {"", ".gz", ".zlib", ".Z"};
    int64_t last = 0;
    for (char c : in_.Take(4)) last = last << 8 | static_cast<uint8_t>(c);
    const int64_t start = kind == sc::SnapshotKind::kFull ? 0 : last / 2;
    // Some time in 2023 with nanoseconds: freshly taken snapshots keep them.
    const auto created = std::chrono::system_clock::time_point{
        std::chrono::seconds{1700000000} + std::chrono::nanoseconds{last * 7919}};
    return sc::NewSnapshot(kind, start, last, created, kSuffixes[in_.Byte() % 4], final);
  }

  InputReader& in_;
  int calls_ = 0;
  bool last_final_ = false;
  std::optional<sc::SnapshotInfo> last_;
};

// Initialisation that waits until the harness lets it finish, and reports the mode it ran with.
struct Initialisation {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;  // a run may finish
  bool fails = false;
  int runs = 0;
  sc::ValidationMode mode = sc::ValidationMode::kFull;

  Status Run(sc::ValidationMode m) {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [this] { return open; });
    ++runs;
    mode = m;
    return fails ? etcdw::Internal("the data directory is corrupt") : Status::Ok();
  }
  void SetOpen(bool o) {
    std::lock_guard<std::mutex> l(mu);
    open = o;
    cv.notify_all();
  }
};

// Go's strconv.ParseBool, read from its documentation.
std::optional<bool> GoBool(const std::string& s) {
  for (const char* t : {"1", "t", "T", "TRUE", "true", "True"}) {
    if (s == t) return true;
  }
  for (const char* f : {"0", "f", "F", "FALSE", "false", "False"}) {
    if (s == f) return false;
  }
  return std::nullopt;
}

std::optional<nlohmann::json> ParseJson(const std::string& body) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// The bytes below 0x80 of `s`, in order.
std::string AsciiOf(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x80) out += c;
  }
  return out;
}

// Whether nlohmann (which refuses invalid UTF-8 when it writes JSON) takes `s` as it is.
bool IsValidUtf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// An object name as answered: itself when it is valid UTF-8, otherwise (Go's coercion: invalid
// bytes become U+FFFD) another string with the same ASCII bytes.
bool IsAnsweredName(const nlohmann::json& answered, const std::string& name) {
  if (!answered.is_string()) return false;
  const std::string& a = answered.get_ref<const std::string&>();
  if (IsValidUtf8(name)) return a == name;
  return a != name && AsciiOf(a) == AsciiOf(name);
}

const char* const kRoutes[] = {
    "/initialization/start", "/initialization/status", "/healthz",         "/metrics", "/config",
    "/snapshot/full",        "/snapshot/delta",        "/snapshot/latest",
};
const char* const kMethods[] = {"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS"};

// One input's API with its pieces, and what the harness expects of it.
class Program {
 public:
  explicit Program(InputReader& in) : in_(in), triggers_(std::make_shared<InputTriggers>(in)) {}

  void Run() {
    const uint8_t setup = in_.Byte();
    std::vector<std::string> keys(in_.Byte() % 8);
    for (std::string& k : keys) k = std::string(in_.Take(in_.Byte()));
    store_fails_ = (setup & 2) != 0;
    store_.emplace(keys, store_fails_);
    config_fails_ = (setup & 32) != 0;
    init_.fails = (setup & 64) != 0;
    config_ = "name: etcd-main-0\ndata-dir: /var/etcd/data/new.etcd\n";

    sc::HttpApi::Deps d;
    d.initialize = [this](sc::ValidationMode m) { return init_.Run(m); };
    d.render_config = [this]() -> Result<std::string> {
      if (config_fails_) return etcdw::NotFound("no etcd configuration template");
      return config_;
    };
    if (setup & 1) d.store = &*store_;
    if (setup & 4) {
      metrics_ = std::make_unique<sc::SidecarMetrics>();
      d.metrics = metrics_.get();
    }
    switch ((setup >> 3) & 3) {
      case 0:  // no delegation
        break;
      case 1:
        d.leader_sidecar_url = [this]() -> Result<std::string> {
          ++lookups_;
          return etcdw::Unavailable("no leader");
        };
        break;
      case 2:
        // Port 1 of the loopback address: nothing listens there, the connection is refused.
        d.leader_sidecar_url = [this]() -> Result<std::string> {
          ++lookups_;
          return std::string("http://127.0.0.1:1");
        };
        break;
      default: {
        // A leader address from the input, used only when ParseUrl refuses it (one that parses
        // could name any host).
        std::string text(in_.Take(in_.Byte() % 32));
        d.leader_sidecar_url = [this, text]() -> Result<std::string> {
          ++lookups_;
          if (etcdw::common::ParseUrl(text).ok()) return etcdw::Unavailable("no leader");
          return text;
        };
        break;
      }
    }
    has_store_ = d.store != nullptr;
    api_.emplace(std::move(d));
    healthy_ = (setup & 128) != 0;
    api_->SetHealthy(healthy_);

    while (!in_.empty()) Step();
    // Initialisation still waiting finishes now, so that the API's destructor can join it.
    init_.SetOpen(true);
    api_.reset();
  }

 private:
  enum class State { kNew, kProgress, kSuccessful, kFailed };
  static const char* Name(State s) {
    switch (s) {
      case State::kNew:
        return "New";
      case State::kProgress:
        return "Progress";
      case State::kSuccessful:
        return "Successful";
      case State::kFailed:
        return "Failed";
    }
    return "?";
  }

  // One step: op % 16 < 15 is a request (op % 16 a route below 8, else another path), 15 an
  // action chosen by op / 16.
  void Step() {
    const uint8_t op = in_.Byte();
    if (op % 16 == 15) return Act(op / 16);
    std::string path;
    if (op % 16 < 8) {
      path = kRoutes[op % 16];
    } else if (op % 16 < 12) {
      path = std::string(in_.Take(in_.Byte() % 64));
    } else {
      // A route with a byte more: near misses ("/healthz/", "/configX") are no routes.
      path = std::string(kRoutes[in_.Byte() % 8]) + static_cast<char>(in_.Byte());
    }
    const uint8_t form = in_.Byte();
    HttpRequest req;
    req.method = form % 8 < 7 ? kMethods[form % 8] : std::string(in_.Take(in_.Byte() % 16));
    req.target = path;
    if (form & 8) req.target += "?" + std::string(in_.Take(in_.Byte() % 64));
    etcdw::common::SplitTarget(req.target, &req.path, &req.query);
    if (form & 16) req.headers["x-etcdw-delegated"] = "1";
    if (form & 32) req.headers["content-type"] = "application/json";
    if (form & 64) req.body = std::string(in_.Take(in_.Byte()));
    req.remote_address = "127.0.0.1";
    req.remote_is_loopback = true;
    Request(req);
  }

  void Act(int action) {
    switch (action % 4) {
      case 0: {
        // Initialisation in progress may finish: wait until the API reports its end.
        if (state_ != State::kProgress) return;
        init_.SetOpen(true);
        while (api_->state() == sc::InitState::kProgress) std::this_thread::yield();
        init_.SetOpen(false);
        state_ = init_.fails ? State::kFailed : State::kSuccessful;
        if (init_.runs != ++runs_) Fail("initialisation ran another number of times than started");
        if (init_.mode != started_mode_) Fail("initialisation ran in another mode than asked");
        return;
      }
      case 1:
        healthy_ = !healthy_;
        api_->SetHealthy(healthy_);
        return;
      case 2:
        leader_ = !leader_;
        api_->SetSnapshotter(leader_ ? triggers_ : nullptr);
        return;
      default:
        config_ = std::string(in_.Take(in_.Byte()));
        return;
    }
  }

  bool IsRoute(const std::string& path) const {
    for (const char* r : kRoutes) {
      if (path == r) return path != "/metrics" || metrics_ != nullptr;
    }
    return false;
  }

  void Request(const HttpRequest& req) {
    const int calls_before = triggers_->calls();
    const int lookups_before = lookups_;
    const HttpResponse resp = api_->Handle(req);
    CheckGeneral(req, resp);
    const std::string& p = req.path;
    if (!IsRoute(p)) {
      if (resp.status != 404 || resp.body != "404 page not found\n") {
        Fail("a path that is no route is not 404", &req, &resp);
      }
      ExpectRepeatable(req, resp, true);
    } else if (p == "/healthz") {
      const char* body = healthy_ ? R"({"health":true})" : R"({"health":false})";
      if (resp.status != (healthy_ ? 200 : 503) || resp.body != body) {
        Fail("/healthz does not tell the health", &req, &resp);
      }
      ExpectRepeatable(req, resp, true);
    } else if (p == "/initialization/start") {
      if (resp.status != 200 || !resp.body.empty()) Fail("start is not 200, empty", &req, &resp);
      if (state_ == State::kNew) {
        state_ = State::kProgress;
        healthy_ = false;
        auto mode = req.query.find("mode");
        started_mode_ = mode != req.query.end() && mode->second == "sanity"
                            ? sc::ValidationMode::kSanity
                            : sc::ValidationMode::kFull;
      }
      if (api_->healthy() != healthy_) Fail("start did not make the sidecar unhealthy", &req);
      if (state_ != State::kNew) ExpectRepeatable(req, resp, true);
    } else if (p == "/initialization/status") {
      if (resp.status != 200 || resp.body != Name(state_)) {
        Fail("the status does not name the state", &req, &resp);
      }
      if (state_ == State::kSuccessful || state_ == State::kFailed) state_ = State::kNew;
    } else if (p == "/config") {
      if (config_fails_) {
        if (resp.status != 500 || resp.body != "no etcd configuration template\n") {
          Fail("a failed rendering is not 500 with its message", &req, &resp);
        }
      } else if (resp.status != 200 || resp.body != config_ ||
                 Header(resp, "Content-Type") != "application/yaml") {
        Fail("/config is not the rendered configuration", &req, &resp);
      }
      ExpectRepeatable(req, resp, true);
    } else if (p == "/metrics") {
      CheckMetrics(req, resp);
    } else if (!has_store_) {
      if (resp.status != 405 || !resp.body.empty()) Fail("no store and not 405", &req, &resp);
      ExpectRepeatable(req, resp, true);
    } else if (p == "/snapshot/latest") {
      CheckLatest(req, resp);
      ExpectRepeatable(req, resp, true);
    } else if (leader_) {
      CheckTrigger(req, resp, calls_before);
    } else {
      if (resp.status != 405) Fail("a follower without a leader did not answer 405", &req, &resp);
      if (req.headers.count("x-etcdw-delegated") > 0 && lookups_ != lookups_before) {
        Fail("a delegated request looked the leader up", &req, &resp);
      }
      if (triggers_->calls() != calls_before) Fail("a follower triggered a snapshot", &req);
    }
  }

  static std::string Header(const HttpResponse& r, const std::string& name) {
    auto it = r.headers.find(name);
    return it == r.headers.end() ? std::string() : it->second;
  }

  static void CheckGeneral(const HttpRequest& req, const HttpResponse& resp) {
    if (resp.status < 100 || resp.status > 599) Fail("a status outside 100-599", &req, &resp);
    const std::string type = Header(resp, "Content-Type");
    if (type.rfind("application/json", 0) == 0 && !ParseJson(resp.body)) {
      Fail("a JSON answer whose body is no JSON", &req, &resp);
    }
  }

  // The same request answers the same: again as it came (`same_body`: the same body too), and
  // by GET (no route looks at the method).
  void ExpectRepeatable(const HttpRequest& req, const HttpResponse& resp, bool same_body) {
    const int calls_before = triggers_->calls();
    HttpRequest get = req;
    get.method = "GET";
    for (const HttpRequest* r : {&req, static_cast<const HttpRequest*>(&get)}) {
      const HttpResponse again = api_->Handle(*r);
      CheckGeneral(*r, again);
      if (again.status != resp.status || (same_body && again.body != resp.body)) {
        Fail("the same request (or it by GET) answered otherwise", r, &again);
      }
    }
    if (triggers_->calls() != calls_before) Fail("a repeated request triggered a snapshot", &req);
  }

  void CheckMetrics(const HttpRequest& req, const HttpResponse& resp) {
    if (resp.status != 200 ||
        Header(resp, "Content-Type") != "text/plain; version=0.0.4; charset=utf-8") {
      Fail("/metrics is not the page", &req, &resp);
    }
    const std::string line =
        "\netcdbr_snapstore_latest_deltas_total " + std::to_string(latest_deltas_) + "\n";
    if (resp.body.find(line) == std::string::npos) {
      Fail("/metrics does not count the latest deltas listed", &req, &resp);
    }
    ExpectRepeatable(req, resp, false);
  }

  // The newest full snapshot of the listing and the deltas after it, chunks skipped: the
  // latest set as gardener describes it, read from the sorted listing.
  void CheckLatest(const HttpRequest& req, const HttpResponse& resp) {
    const std::vector<sc::SnapshotInfo>& list = store_->list();
    if (store_fails_) {
      if (resp.status != 500 || resp.body != "the store cannot be listed\n") {
        Fail("a failed listing is not 500 with its error", &req, &resp);
      }
      return;
    }
    if (resp.status != 200) Fail("/snapshot/latest is not 200", &req, &resp);
    const std::optional<nlohmann::json> j = ParseJson(resp.body);
    if (!j || !j->is_object() || !j->contains("fullSnapshot") || !j->contains("deltaSnapshots")) {
      Fail("/snapshot/latest is not {fullSnapshot, deltaSnapshots}", &req, &resp);
    }
    std::optional<std::string> full;
    std::vector<std::string> deltas;
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      if (it->is_chunk) continue;
      if (it->kind == sc::SnapshotKind::kFull) {
        full = it->snap_name;
        break;
      }
      deltas.insert(deltas.begin(), it->snap_name);
    }
    const nlohmann::json& f = (*j)["fullSnapshot"];
    if (full ? !f.is_object() || !IsAnsweredName(f.value("snapName", nlohmann::json()), *full) ||
                   f.value("kind", nlohmann::json()) != "Full"
             : !f.is_null()) {
      Fail("fullSnapshot is not the newest full snapshot", &req, &resp);
    }
    const nlohmann::json& ds = (*j)["deltaSnapshots"];
    if (deltas.empty() ? !ds.is_null() : !ds.is_array() || ds.size() != deltas.size()) {
      Fail("deltaSnapshots are not the deltas after it", &req, &resp);
    }
    for (size_t i = 0; i < deltas.size(); ++i) {
      if (!ds[i].is_object() ||
          !IsAnsweredName(ds[i].value("snapName", nlohmann::json()), deltas[i]) ||
          ds[i].value("kind", nlohmann::json()) != "Incr" || ds[i].value("isChunk", true)) {
        Fail("a delta snapshot listed otherwise", &req, &resp);
      }
    }
    if (metrics_ != nullptr) {
      latest_deltas_ = deltas.size();
      if (metrics_->latest_deltas.Value() != static_cast<double>(deltas.size())) {
        Fail("the latest-delta gauge does not count the deltas answered", &req, &resp);
      }
    }
  }

  void CheckTrigger(const HttpRequest& req, const HttpResponse& resp, int calls_before) {
    bool final = false;
    if (req.path == "/snapshot/full") {
      if (auto it = req.query.find("final"); it != req.query.end()) {
        const std::optional<bool> b = GoBool(it->second);
        if (!b) {
          if (resp.status != 400 ||
              resp.body != "invalid value for final: \"" + it->second + "\"\n") {
            Fail("a final that is no bool is not 400 naming it", &req, &resp);
          }
          if (triggers_->calls() != calls_before) Fail("a refused request triggered", &req);
          ExpectRepeatable(req, resp, true);
          return;
        }
        final = *b;
      }
    }
    if (triggers_->calls() != calls_before + 1) Fail("not exactly one trigger", &req, &resp);
    if (resp.status == 500) {
      if (resp.body != "the snapshotter is not running\n" &&
          resp.body != "delta snapshots are off\n") {
        Fail("a failed trigger is 500 without its message", &req, &resp);
      }
      return;
    }
    if (resp.status != 200) Fail("a snapshot taken is not 200", &req, &resp);
    const std::optional<nlohmann::json> j = ParseJson(resp.body);
    if (!j) Fail("a snapshot taken is answered without JSON", &req, &resp);
    const std::optional<sc::SnapshotInfo>& taken = triggers_->last();
    if (!taken) {
      if (!j->is_null()) Fail("a delta without events is not null", &req, &resp);
      return;
    }
    if (!j->is_object() || j->value("snapName", nlohmann::json()) != taken->snap_name ||
        j->value("isFinal", nlohmann::json()) != taken->is_final ||
        j->value("lastRevision", nlohmann::json()) != taken->last_revision) {
      Fail("the snapshot taken is answered otherwise", &req, &resp);
    }
    if (req.path == "/snapshot/full" && triggers_->last_final() != final) {
      Fail("final was passed on otherwise", &req, &resp);
    }
  }

  InputReader& in_;
  std::shared_ptr<InputTriggers> triggers_;
  std::optional<ListedStore> store_;
  std::unique_ptr<sc::SidecarMetrics> metrics_;
  Initialisation init_;
  std::string config_;
  bool config_fails_ = false;
  bool store_fails_ = false;
  bool has_store_ = false;
  int lookups_ = 0;
  std::optional<sc::HttpApi> api_;  // last: destroyed first, joining initialisation

  // The model.
  State state_ = State::kNew;
  bool healthy_ = false;
  bool leader_ = false;
  int runs_ = 0;
  sc::ValidationMode started_mode_ = sc::ValidationMode::kFull;
  size_t latest_deltas_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    etcdw::log::SetLevel(etcdw::log::Level::kOff);
    return true;
  }();
  (void)quiet;
  InputReader in(std::string_view(reinterpret_cast<const char*>(data), size));
  Program(in).Run();
  return 0;
}

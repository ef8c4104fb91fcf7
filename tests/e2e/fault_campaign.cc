#include "e2e/fault_campaign.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "e2e/peer_proxy.h"
#include "servers.h"
#include "sim/linearizability.h"
#include "watch_requests.h"

namespace etcdw::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// Every client call's deadline: long enough for a loaded machine, short next to a fault.
constexpr milliseconds kOpTimeout(1000);
// A client pauses this long after a failed call before it tries the next member.
constexpr milliseconds kRetryPause(50);
// How long a member may take to be ready again, a new leader to be elected, the end of a round
// to be read, the watcher to catch up.
constexpr milliseconds kRecoveryTimeout(30000);
// Every key the campaign writes starts with this (the watcher watches every key).
const char* const kPrefix = "c/";

// The one clock of the histories: nanoseconds since the campaign started.
class HistoryClock {
 public:
  uint64_t Now() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count());
  }
  double Seconds() const { return static_cast<double>(Now()) / 1e9; }

 private:
  Clock::time_point start_ = Clock::now();
};

// A channel of its own to a member, with a short reconnect backoff: a restarted member is
// reachable again within a fraction of a second instead of after gRPC's default backoff.
std::shared_ptr<grpc::Channel> CampaignChannel(const std::string& endpoint) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  return grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
}

// One client per member, to move to another member when a call fails.
std::vector<std::unique_ptr<Client>> ClientsFor(const std::vector<std::string>& endpoints) {
  std::vector<std::unique_ptr<Client>> clients;
  clients.reserve(endpoints.size());
  for (const auto& e : endpoints) clients.push_back(std::make_unique<Client>(CampaignChannel(e)));
  return clients;
}

// An acknowledged write and the revision its answer named.
struct AckedWrite {
  int64_t revision = 0;
  std::string key;
  std::string value;
};

// What the clients of one round recorded; each client fills its own and the round merges them.
struct ClientLog {
  std::vector<sim::Operation> ops;
  std::vector<AckedWrite> acked;
  std::vector<std::string> unknown_inserts;  // keys of inserts whose outcome is unknown
  uint64_t puts_ok = 0, puts_unknown = 0, gets_ok = 0, gets_failed = 0;
  uint64_t cas_ok = 0, cas_failed = 0, cas_unknown = 0;
  std::string error;  // a malformed answer
};

// Register i of a round: the first `keys` take puts and gets, the next ones CASes and gets.
std::string RegisterKey(const std::string& round_prefix, uint64_t i) {
  return round_prefix + "k" + std::to_string(i);
}

// A register's value as the campaign writes it (decimal, non-zero); false when it is not one.
bool ParseRegister(const etcdserverpb::RangeResponse& resp, int64_t* value) {
  *value = 0;
  if (resp.kvs_size() == 0) return true;
  const std::string& v = resp.kvs(0).value();
  char* end = nullptr;
  *value = std::strtoll(v.c_str(), &end, 10);
  return !v.empty() && *end == '\0' && *value != 0;
}

// One register client's calls; each records its operation in the log and returns false when the
// call failed (the client then moves to another member).
class RegisterOps {
 public:
  RegisterOps(Client& client, int client_number, const HistoryClock& clock, ClientLog* log)
      : c_(client), client_number_(client_number), clock_(clock), log_(log) {}

  bool Put(sim::Operation op) {
    op.kind = sim::OpKind::kPut;
    op.id = NextId();
    etcdserverpb::PutRequest req;
    req.set_key(op.key);
    req.set_value(std::to_string(op.value));
    etcdserverpb::PutResponse resp;
    op.call = clock_.Now();
    grpc::Status st = c_.kv->Put(Ctx(kOpTimeout).get(), req, &resp);
    const bool ok = st.ok();
    // Sent or not, a failed put may take effect at any time later: never returned.
    op.ret = ok ? clock_.Now() : sim::kNeverReturned;
    if (ok) {
      ++log_->puts_ok;
      log_->acked.push_back({resp.header().revision(), op.key, req.value()});
    } else {
      ++log_->puts_unknown;
    }
    log_->ops.push_back(op);
    return ok;
  }

  // A linearizable get; *seen is the value read.
  bool Get(sim::Operation op, int64_t* seen) {
    op.kind = sim::OpKind::kGet;
    op.id = NextId();
    etcdserverpb::RangeRequest req;
    req.set_key(op.key);
    etcdserverpb::RangeResponse resp;
    op.call = clock_.Now();
    grpc::Status st = c_.kv->Range(Ctx(kOpTimeout).get(), req, &resp);
    op.ret = clock_.Now();
    if (!st.ok()) {
      ++log_->gets_failed;  // a get with an unknown outcome constrains nothing: left out
      return false;
    }
    if (!ParseRegister(resp, &op.value)) {
      log_->error = "get of " + op.key + " answered the value '" + resp.kvs(0).value() + "'";
      return false;
    }
    *seen = op.value;
    ++log_->gets_ok;
    log_->ops.push_back(op);
    return true;
  }

  // A Txn that puts op.value if the key holds op.expected (is absent, for 0).
  bool Cas(sim::Operation op) {
    op.kind = sim::OpKind::kCas;
    op.id = NextId();
    etcdserverpb::TxnRequest req;
    auto* cmp = req.add_compare();
    cmp->set_key(op.key);
    cmp->set_result(etcdserverpb::Compare::EQUAL);
    if (op.expected == 0) {
      cmp->set_target(etcdserverpb::Compare::VERSION);
      cmp->set_version(0);
    } else {
      cmp->set_target(etcdserverpb::Compare::VALUE);
      cmp->set_value(std::to_string(op.expected));
    }
    auto* put = req.add_success()->mutable_request_put();
    put->set_key(op.key);
    put->set_value(std::to_string(op.value));
    etcdserverpb::TxnResponse resp;
    op.call = clock_.Now();
    grpc::Status st = c_.kv->Txn(Ctx(kOpTimeout).get(), req, &resp);
    const bool ok = st.ok();
    op.ret = ok ? clock_.Now() : sim::kNeverReturned;
    op.succeeded = ok && resp.succeeded();
    if (!ok) {
      ++log_->cas_unknown;
    } else if (op.succeeded) {
      ++log_->cas_ok;
      log_->acked.push_back({resp.header().revision(), op.key, put->value()});
    } else {
      ++log_->cas_failed;
    }
    log_->ops.push_back(op);
    return ok;
  }

 private:
  // Each operation's ID: the client's number in the high bits, its index in the log below.
  uint64_t NextId() const {
    return (static_cast<uint64_t>(client_number_) << 40) | log_->ops.size();
  }

  Client& c_;
  int client_number_;
  const HistoryClock& clock_;
  ClientLog* log_;
};

// A register client: on the round's first `keys` registers puts (values unique over the whole
// campaign) and linearizable gets; on the next `cas_keys` CASes from the value it last saw and
// gets; chosen by its own PRNG, until `stop`.
void RunRegisterClient(const std::vector<std::string>& endpoints, const std::string& round_prefix,
                       int keys, int cas_keys, int client, uint64_t seed, const HistoryClock& clock,
                       const std::atomic<bool>& stop, ClientLog* log) {
  auto clients = ClientsFor(endpoints);
  std::mt19937_64 rng(seed);
  size_t target = static_cast<size_t>(client) % clients.size();
  uint64_t seq = 0;
  std::map<uint64_t, int64_t> last_seen;  // CAS register -> the value this client last saw
  while (!stop.load() && log->error.empty()) {
    const uint64_t k = rng() % static_cast<uint64_t>(keys + cas_keys);
    sim::Operation op;
    op.key = RegisterKey(round_prefix, k);
    // Unique and non-zero: the client in the high digits, its sequence number below.
    const int64_t fresh =
        static_cast<int64_t>((static_cast<uint64_t>(client) + 1) * 1'000'000'000 + seq + 1);
    RegisterOps ops(*clients[target], client, clock, log);
    const bool cas_key = k >= static_cast<uint64_t>(keys);
    bool ok = true;
    if (rng() % 2 == 0) {
      op.value = fresh;
      ++seq;
      if (cas_key) {
        op.expected = last_seen[k];
        ok = ops.Cas(op);
        // Known after a success; after a failure or an unknown outcome, guessed anew by a get.
        if (ok && !log->ops.back().succeeded) ok = ops.Get(op, &last_seen[k]);
        if (ok && log->ops.back().kind == sim::OpKind::kCas) last_seen[k] = op.value;
      } else {
        ok = ops.Put(op);
      }
    } else {
      int64_t seen = 0;
      ok = ops.Get(op, &seen);
      if (ok && cas_key) last_seen[k] = seen;
    }
    if (!ok) {
      target = (target + 1) % clients.size();
      std::this_thread::sleep_for(kRetryPause);
    }
  }
}

// The bank: accounts that Txns move money between; the total never changes, at any revision.
constexpr int kAccounts = 5;
constexpr int64_t kOpeningBalance = 100;
constexpr int64_t kBankTotal = kAccounts * kOpeningBalance;

std::string AccountKey(const std::string& round_prefix, int i) {
  return round_prefix + "bank/a" + std::to_string(i);
}

// The accounts as a read returned them; empty when the read is not a whole, balanced bank.
std::string CheckBank(const etcdserverpb::RangeResponse& resp, const std::string& what) {
  int64_t total = 0;
  for (const auto& kv : resp.kvs()) total += std::strtoll(kv.value().c_str(), nullptr, 10);
  if (resp.kvs_size() == kAccounts && total == kBankTotal) return "";
  std::string accounts;
  for (const auto& kv : resp.kvs()) accounts += " " + kv.key() + "=" + kv.value();
  return "the bank " + what + " holds " + std::to_string(total) + " in " +
         std::to_string(resp.kvs_size()) + " accounts, not " + std::to_string(kBankTotal) + " in " +
         std::to_string(kAccounts) + ":" + accounts;
}

struct BankLog {
  uint64_t transfers = 0, conflicts = 0, unknown = 0, reads = 0, past_reads = 0;
  std::string error;
};

// A bank client: reads every account (linearizable and serializable in turn) and checks the
// total, moves a random amount between two accounts by a Txn that compares both accounts'
// mod revisions, and now and then reads the bank at a past revision since `opened` and checks
// it too; until `stop`.
void RunBankClient(const std::vector<std::string>& endpoints, const std::string& round_prefix,
                   int64_t opened, uint64_t seed, const std::atomic<bool>& stop, BankLog* log) {
  auto clients = ClientsFor(endpoints);
  std::mt19937_64 rng(seed);
  size_t target = 0;
  const std::string from_key = AccountKey(round_prefix, 0);
  const std::string to_key = round_prefix + "bank0";  // just past "bank/"
  for (uint64_t i = 0; !stop.load() && log->error.empty(); ++i) {
    Client& c = *clients[target];
    etcdserverpb::RangeRequest read;
    read.set_key(round_prefix + "bank/");
    read.set_range_end(to_key);
    read.set_serializable(i % 2 == 1);
    etcdserverpb::RangeResponse bank;
    bool ok = c.kv->Range(Ctx(kOpTimeout).get(), read, &bank).ok();
    if (ok) {
      ++log->reads;
      log->error =
          CheckBank(bank, std::string(read.serializable() ? "serializable" : "linear") +
                              " read at revision " + std::to_string(bank.header().revision()));
      if (!log->error.empty()) return;
      const int a = static_cast<int>(rng() % kAccounts);
      const int b = static_cast<int>((a + 1 + rng() % (kAccounts - 1)) % kAccounts);
      const auto& from = bank.kvs(a);
      const auto& to = bank.kvs(b);
      const int64_t balance = std::strtoll(from.value().c_str(), nullptr, 10);
      if (balance > 0 && !read.serializable()) {
        const int64_t amount = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(balance));
        etcdserverpb::TxnRequest txn;
        for (const auto* kv : {&from, &to}) {
          auto* cmp = txn.add_compare();
          cmp->set_key(kv->key());
          cmp->set_target(etcdserverpb::Compare::MOD);
          cmp->set_result(etcdserverpb::Compare::EQUAL);
          cmp->set_mod_revision(kv->mod_revision());
        }
        auto* debit = txn.add_success()->mutable_request_put();
        debit->set_key(from.key());
        debit->set_value(std::to_string(balance - amount));
        auto* credit = txn.add_success()->mutable_request_put();
        credit->set_key(to.key());
        credit->set_value(std::to_string(std::strtoll(to.value().c_str(), nullptr, 10) + amount));
        etcdserverpb::TxnResponse resp;
        ok = c.kv->Txn(Ctx(kOpTimeout).get(), txn, &resp).ok();
        if (!ok) {
          ++log->unknown;
        } else {
          ++(resp.succeeded() ? log->transfers : log->conflicts);
        }
      }
      if (ok && i % 4 == 0 && bank.header().revision() > opened) {
        const int64_t past =
            opened + static_cast<int64_t>(
                         rng() % static_cast<uint64_t>(bank.header().revision() - opened + 1));
        read.set_revision(past);
        read.set_serializable(false);
        ok = c.kv->Range(Ctx(kOpTimeout).get(), read, &bank).ok();
        if (ok) {
          ++log->past_reads;
          log->error = CheckBank(bank, "read at past revision " + std::to_string(past));
        }
      }
    }
    if (!ok) {
      target = (target + 1) % clients.size();
      std::this_thread::sleep_for(kRetryPause);
    }
  }
}

// Leases: granted, attached to a key, kept alive a while, then left to expire. A lease must not
// expire early: the server renews it at or after the moment a keep-alive was sent, so its key
// may be gone only once the TTL of the last answered keep-alive has passed since that sending.
constexpr int64_t kLeaseTtlSeconds = 2;

struct LeaseLog {
  uint64_t granted = 0, renewals = 0, expired = 0, checks = 0;
  std::string error;
};

class LeaseClient {
 public:
  LeaseClient(const std::vector<std::string>& endpoints, std::string round_prefix, uint64_t seed,
              const HistoryClock& clock, const std::atomic<bool>& stop, LeaseLog* log)
      : clients_(ClientsFor(endpoints)),
        prefix_(std::move(round_prefix)),
        rng_(seed),
        clock_(clock),
        stop_(stop),
        log_(log) {}

  void Run() {
    for (int n = 0; !stop_.load() && log_->error.empty(); ++n) {
      if (!Grant(n)) Fail();
    }
  }

 private:
  Client& client() { return *clients_[target_]; }
  void Fail() {
    target_ = (target_ + 1) % clients_.size();
    std::this_thread::sleep_for(kRetryPause);
  }

  // One lease's life: grant, attach, keep alive for 0.5-3 s, then watch its key until it goes.
  // False when a call failed before the key was attached.
  bool Grant(int n) {
    etcdserverpb::LeaseGrantRequest grant;
    grant.set_ttl(kLeaseTtlSeconds);
    etcdserverpb::LeaseGrantResponse granted;
    uint64_t renewed_from = clock_.Now();  // the lease lives TTL from here at least
    if (!client().lease->LeaseGrant(Ctx(kOpTimeout).get(), grant, &granted).ok() ||
        !granted.error().empty()) {
      return false;
    }
    ++log_->granted;
    int64_t ttl = granted.ttl();
    const std::string key = prefix_ + "lease/" + std::to_string(n);
    etcdserverpb::PutRequest put;
    put.set_key(key);
    put.set_value("l");
    put.set_lease(granted.id());
    etcdserverpb::PutResponse put_resp;
    // An unknown outcome leaves nothing to check: whether the key was ever attached is unknown.
    if (!client().kv->Put(Ctx(kOpTimeout).get(), put, &put_resp).ok()) return false;
    const uint64_t keep_until = clock_.Now() + (500 + rng_() % 2500) * 1'000'000;
    while (!stop_.load()) {
      if (clock_.Now() < keep_until) {
        const uint64_t sent = clock_.Now();
        int64_t answered_ttl = 0;
        if (KeepAlive(granted.id(), &answered_ttl)) {
          if (answered_ttl > 0) {
            renewed_from = sent;
            ttl = answered_ttl;
            ++log_->renewals;
          } else if (!CheckGone(
                         key, "a keep-alive found lease " + std::to_string(granted.id()) + " gone",
                         clock_.Now(), renewed_from, ttl)) {
            return true;
          }
        } else {
          Fail();
        }
      }
      etcdserverpb::RangeRequest get;
      get.set_key(key);
      etcdserverpb::RangeResponse got;
      if (!client().kv->Range(Ctx(kOpTimeout).get(), get, &got).ok()) {
        Fail();
        continue;
      }
      ++log_->checks;
      if (got.kvs_size() == 0) {
        if (CheckGone(key, "a read found " + key + " gone", clock_.Now(), renewed_from, ttl)) {
          ++log_->expired;
        }
        return true;
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
    return true;
  }

  // Records an early expiry in the log: `seen_at` is before `renewed_from` + `ttl`. False then.
  bool CheckGone(const std::string& key, const std::string& what, uint64_t seen_at,
                 uint64_t renewed_from, int64_t ttl) {
    const uint64_t due = renewed_from + static_cast<uint64_t>(ttl) * 1'000'000'000;
    if (seen_at >= due) return true;
    log_->error =
        "lease expired early: " + what + " " +
        std::to_string(static_cast<double>(due - seen_at) / 1e6) + " ms before its TTL of " +
        std::to_string(ttl) + " s since the last answered keep-alive was sent (key " + key +
        "; seen at t=" + std::to_string(static_cast<double>(seen_at) / 1e9) + " s from member " +
        std::to_string(target_) +
        ", renewed from t=" + std::to_string(static_cast<double>(renewed_from) / 1e9) + " s)";
    return false;
  }

  // One keep-alive on a stream of its own; *ttl is the TTL answered (0: the lease is gone).
  bool KeepAlive(int64_t id, int64_t* ttl) {
    auto ctx = Ctx(kOpTimeout);
    auto stream = client().lease->LeaseKeepAlive(ctx.get());
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(id);
    etcdserverpb::LeaseKeepAliveResponse resp;
    const bool ok = stream->Write(req) && stream->Read(&resp);
    ctx->TryCancel();
    (void)stream->Finish();
    *ttl = resp.ttl();
    return ok;
  }

  std::vector<std::unique_ptr<Client>> clients_;
  std::string prefix_;
  std::mt19937_64 rng_;
  const HistoryClock& clock_;
  const std::atomic<bool>& stop_;
  LeaseLog* log_;
  size_t target_ = 0;
};

// An insert client: creates keys of its own, one after the other, until `stop`.
void RunInsertClient(const std::vector<std::string>& endpoints, const std::string& round_prefix,
                     int client, const std::atomic<bool>& stop, ClientLog* log) {
  auto clients = ClientsFor(endpoints);
  size_t target = static_cast<size_t>(client) % clients.size();
  for (uint64_t seq = 0; !stop.load(); ++seq) {
    etcdserverpb::PutRequest req;
    req.set_key(round_prefix + "ins/" + std::to_string(client) + "/" + std::to_string(seq));
    req.set_value("v" + std::to_string(seq));
    etcdserverpb::PutResponse resp;
    grpc::Status st = clients[target]->kv->Put(Ctx(kOpTimeout).get(), req, &resp);
    if (st.ok()) {
      ++log->puts_ok;
      log->acked.push_back({resp.header().revision(), req.key(), req.value()});
    } else {
      ++log->puts_unknown;
      log->unknown_inserts.push_back(req.key());
      target = (target + 1) % clients.size();
      std::this_thread::sleep_for(kRetryPause);
    }
  }
}

// The keys and values a watcher saw at one revision (several for a Txn).
using WatchedRevision = std::vector<std::pair<std::string, std::string>>;

// A watcher of every campaign key from revision 1, moving to the next member whenever its stream
// ends; it must see each revision once and in order.
class Watcher {
 public:
  explicit Watcher(std::vector<std::string> endpoints) : endpoints_(std::move(endpoints)) {}
  ~Watcher() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      if (ctx_ != nullptr) ctx_->TryCancel();
    }
    if (thread_.joinable()) thread_.join();
  }
  // The next revision it expects: every revision below it has been seen.
  int64_t next_revision() {
    std::lock_guard<std::mutex> lock(mu_);
    return next_rev_;
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }
  int reconnects() {
    std::lock_guard<std::mutex> lock(mu_);
    return reconnects_;
  }
  // After Stop: the events seen, by revision.
  const std::map<int64_t, WatchedRevision>& events() const { return events_; }

 private:
  void Run() {
    auto clients = ClientsFor(endpoints_);
    size_t target = 0;
    for (;;) {
      auto ctx = std::make_unique<grpc::ClientContext>();
      int64_t from = 0;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_ || !error_.empty()) break;
        ctx_ = ctx.get();
        from = next_rev_ == kFirstEventRevision ? 1 : next_rev_;
      }
      auto stream = clients[target]->watch->Watch(ctx.get());
      if (stream->Write(testsupport::CreateWatch(kPrefix, "c0", from))) {
        etcdserverpb::WatchResponse resp;
        while (stream->Read(&resp)) {
          if (!Take(resp)) break;
        }
      }
      ctx->TryCancel();
      (void)stream->Finish();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ctx_ = nullptr;
        if (stop_ || !error_.empty()) break;
        ++reconnects_;
      }
      target = (target + 1) % clients.size();
      std::this_thread::sleep_for(milliseconds(100));
    }
  }

  // Checks and records one response; false when the stream must not go on.
  bool Take(const etcdserverpb::WatchResponse& resp) {
    std::lock_guard<std::mutex> lock(mu_);
    if (resp.canceled()) {
      error_ = "the watch was canceled: " + resp.cancel_reason() + " (compact revision " +
               std::to_string(resp.compact_revision()) + ")";
      return false;
    }
    int64_t this_response = 0;  // the revision of this response's events so far
    for (const auto& ev : resp.events()) {
      int64_t rev = ev.kv().mod_revision();
      // A Txn writes several keys at one revision; its events come together, keys apart.
      if (rev == this_response) {
        auto& keys = events_[rev];
        for (const auto& [k, v] : keys) {
          if (k == ev.kv().key()) {
            error_ = "the watcher saw " + k + " twice at revision " + std::to_string(rev);
            return false;
          }
        }
        keys.emplace_back(ev.kv().key(), ev.kv().value());
        continue;
      }
      if (rev != next_rev_) {
        error_ = "the watcher expected revision " + std::to_string(next_rev_) + " and got " +
                 std::to_string(rev) +
                 (rev < next_rev_ ? " (seen twice or out of order)" : " (gap)") + " after " +
                 std::to_string(reconnects_) + " reconnects";
        return false;
      }
      events_[rev] = {{ev.kv().key(), ev.kv().value()}};
      this_response = rev;
      ++next_rev_;
    }
    return true;
  }

  // A new cluster is at revision 1 with no keys: the first write makes revision 2.
  static constexpr int64_t kFirstEventRevision = 2;

  std::vector<std::string> endpoints_;
  std::thread thread_;
  std::mutex mu_;
  bool stop_ = false;
  grpc::ClientContext* ctx_ = nullptr;
  int64_t next_rev_ = kFirstEventRevision;
  int reconnects_ = 0;
  std::string error_;
  std::map<int64_t, WatchedRevision> events_;
};

// One fault as it was carried out.
struct ExecutedFault {
  double at_s = 0;
  PlannedFault plan;
  std::string member;
  std::string note;
};

class Campaign {
 public:
  explicit Campaign(const CampaignOptions& o)
      : o_(o), plan_(PlanFaults(o.seed, o.cycles, o.kinds)) {}

  CampaignResult Run() {
    std::string verdict = RunChecks();
    CampaignResult r;
    r.passed = verdict.empty();
    std::ostringstream s;
    s << "fault campaign: seed=" << o_.seed << " members=" << o_.members
      << " cycles=" << cycles_done_ << "/" << o_.cycles << " ops=" << register_ops_ << " (puts ok "
      << puts_ok_ << ", unknown " << puts_unknown_ << "; gets ok " << gets_ok_ << ", failed "
      << gets_failed_ << "; CAS ok " << cas_ok_ << ", failed " << cas_failed_ << ", unknown "
      << cas_unknown_ << ") bank transfers=" << transfers_ << " (" << transfer_conflicts_
      << " conflicts, " << transfers_unknown_ << " unknown; " << bank_reads_
      << " reads) leases=" << leases_granted_ << " (" << lease_renewals_ << " renewals, "
      << leases_expired_ << " expired) inserts=" << inserts_ok_ << " acked, " << inserts_unknown_
      << " unknown; watch events=" << watch_events_ << " (" << watch_reconnects_
      << " reconnects); faults:";
    for (int k = 0; k < kFaultKinds; ++k) {
      s << " " << FaultName(static_cast<FaultKind>(k)) << "=" << faults_[static_cast<size_t>(k)];
    }
    s << "; peer proxy dropped " << (proxy_ ? proxy_->dropped_bytes() : 0) << " bytes; "
      << check_steps_ << " checker steps; " << clock_.Seconds()
      << " s; verdict=" << (r.passed ? "PASS" : "FAIL");
    r.summary = s.str();
    std::ostringstream executed;
    for (const auto& e : executed_) {
      executed << "  t=" << e.at_s << "s cycle " << e.plan.cycle << ": " << FaultName(e.plan.kind)
               << " " << e.member << " " << e.note << "\n";
    }
    r.executed = executed.str();
    if (!r.passed) {
      std::ostringstream f;
      f << verdict << "\nreplay with ETCDW_CAMPAIGN_SEED=" << o_.seed
        << " ETCDW_CAMPAIGN_CYCLES=" << o_.cycles << " ETCDW_CAMPAIGN_MEMBERS=" << o_.members
        << "\nplanned schedule:\n"
        << DescribePlan(plan_) << "executed:\n"
        << r.executed;
      if (cluster_)
        f << cluster_->LogTails(std::getenv("ETCDW_CAMPAIGN_FULL_LOGS") ? 1 << 24 : 3000);
      r.failure = f.str();
    }
    return r;
  }

 private:
  // Runs the campaign; an empty string when every check passed, else what failed.
  std::string RunChecks() {
    n_ = o_.members;
    proxy_ = std::make_unique<PeerProxy>(n_);
    if (!proxy_->ok()) return "the peer proxy could not listen";
    cluster_ = std::make_unique<TestCluster>(n_);
    for (int i = 0; i < n_; ++i) {
      Member& m = cluster_->member(i);
      m.set_advertised_peer_port(proxy_->port(i));
      proxy_->SetTarget(i, m.peer_port());
      m.set_extra_env({std::string("LD_PRELOAD=") + ETCDW_SLOW_FSYNC_LIB,
                       "ETCDW_SLOW_FSYNC_FILE=" + SlowFsyncFile(m)});
    }
    if (!cluster_->StartAll()) return "the cluster did not start";
    if (cluster_->WaitForLeader() < 0) return "the new cluster elected no leader";
    for (int i = 0; i < n_; ++i) {
      endpoints_.push_back(cluster_->member(i).endpoint());
      uint64_t id = StatusOf(cluster_->member(i)).header().member_id();
      if (id == 0) return cluster_->member(i).name() + " did not tell its ID";
      ids_.push_back(id);
      proxy_->SetMemberId(i, id);
    }
    Watcher watcher(endpoints_);
    watcher.Start();
    std::string failure;
    int round = 0;
    for (size_t next = 0; next < plan_.size() && failure.empty(); ++round) {
      size_t end = std::min(plan_.size(), next + static_cast<size_t>(o_.cycles_per_round));
      failure = RunRound(round, next, end);
      next = end;
    }
    if (failure.empty()) failure = CheckWatcher(watcher);
    watcher.Stop();
    for (const auto& [rev, kvs] : watcher.events()) watch_events_ += kvs.size();
    watch_reconnects_ = watcher.reconnects();
    return failure;
  }

  // Cycles [first, end) of the plan with a fresh workload, then the round's checks.
  std::string RunRound(int round, size_t first, size_t end) {
    const std::string prefix = std::string(kPrefix) + "r" + std::to_string(round) + "/";
    std::atomic<bool> stop{false};
    std::vector<ClientLog> regs(static_cast<size_t>(o_.register_clients));
    std::vector<ClientLog> inserts(static_cast<size_t>(o_.insert_clients));
    std::vector<std::thread> threads;
    for (int c = 0; c < o_.register_clients; ++c) {
      uint64_t client_seed =
          o_.seed * 1'000'003 + static_cast<uint64_t>(round) * 101 + static_cast<uint64_t>(c);
      threads.emplace_back(RunRegisterClient, std::cref(endpoints_), prefix, o_.register_keys,
                           o_.cas_keys, c, client_seed, std::cref(clock_), std::cref(stop),
                           &regs[static_cast<size_t>(c)]);
    }
    for (int c = 0; c < o_.insert_clients; ++c) {
      threads.emplace_back(RunInsertClient, std::cref(endpoints_), prefix, c, std::cref(stop),
                           &inserts[static_cast<size_t>(c)]);
    }
    int64_t opened = 0;
    std::string failure = OpenBank(prefix, &opened);
    if (!failure.empty()) {
      stop = true;
      for (auto& t : threads) t.join();
      return "round " + std::to_string(round) + ": " + failure;
    }
    std::vector<LeaseLog> leases(static_cast<size_t>(o_.lease_clients));
    for (int c = 0; c < o_.lease_clients; ++c) {
      uint64_t client_seed =
          o_.seed * 9'000'011 + static_cast<uint64_t>(round) * 101 + static_cast<uint64_t>(c);
      threads.emplace_back([this, &prefix, &stop, &leases, c, client_seed] {
        LeaseClient(endpoints_, prefix + "c" + std::to_string(c) + "/", client_seed, clock_, stop,
                    &leases[static_cast<size_t>(c)])
            .Run();
      });
    }
    std::vector<BankLog> banks(static_cast<size_t>(o_.bank_clients));
    for (int c = 0; c < o_.bank_clients; ++c) {
      uint64_t client_seed =
          o_.seed * 7'000'003 + static_cast<uint64_t>(round) * 101 + static_cast<uint64_t>(c);
      threads.emplace_back(RunBankClient, std::cref(endpoints_), prefix, opened, client_seed,
                           std::cref(stop), &banks[static_cast<size_t>(c)]);
    }
    for (size_t i = first; i < end && failure.empty(); ++i) {
      failure = RunCycle(plan_[i]);
      if (failure.empty()) ++cycles_done_;
    }
    stop = true;
    for (auto& t : threads) t.join();
    if (!failure.empty()) return failure;

    // The cluster is whole again: read each register once more, then check the round.
    std::vector<sim::Operation> history;
    for (auto& log : regs) {
      if (!log.error.empty()) return log.error;
      history.insert(history.end(), log.ops.begin(), log.ops.end());
      puts_ok_ += log.puts_ok;
      puts_unknown_ += log.puts_unknown;
      gets_ok_ += log.gets_ok;
      gets_failed_ += log.gets_failed;
      cas_ok_ += log.cas_ok;
      cas_failed_ += log.cas_failed;
      cas_unknown_ += log.cas_unknown;
      acked_.insert(acked_.end(), log.acked.begin(), log.acked.end());
    }
    for (int k = 0; k < o_.register_keys + o_.cas_keys; ++k) {
      sim::Operation op;
      op.id = (uint64_t{1} << 60) | static_cast<uint64_t>(k);
      op.key = RegisterKey(prefix, static_cast<uint64_t>(k));
      etcdserverpb::RangeResponse resp;
      if (!ReadEventually(op.key, "", &resp, &op.call, &op.ret)) {
        return "round " + std::to_string(round) + ": no member answered the final read of " +
               op.key;
      }
      op.value = resp.kvs_size() > 0 ? std::strtoll(resp.kvs(0).value().c_str(), nullptr, 10) : 0;
      history.push_back(op);
    }
    register_ops_ += history.size();
    if (std::none_of(regs.begin(), regs.end(), [](const ClientLog& l) { return l.puts_ok > 0; }) ||
        std::none_of(regs.begin(), regs.end(), [](const ClientLog& l) { return l.gets_ok > 0; })) {
      return "round " + std::to_string(round) + ": the register clients made no progress";
    }
    sim::CheckResult lin = sim::CheckLinearizable(history);
    check_steps_ += lin.steps;
    if (lin.verdict != sim::Verdict::kLinearizable) {
      return "round " + std::to_string(round) + ": the history of " + lin.key + " is " +
             sim::VerdictName(lin.verdict) + " (" + std::to_string(history.size()) +
             " operations in the round, " + std::to_string(lin.steps) + " search steps):\n" +
             lin.detail;
    }
    failure = CheckInserts(round, prefix, inserts);
    if (!failure.empty()) return failure;
    failure = CheckBankRound(prefix, banks);
    if (failure.empty()) failure = CheckLeaseRound(leases);
    return failure.empty() ? "" : "round " + std::to_string(round) + ": " + failure;
  }

  // No lease expired early, and leases were kept alive and expired.
  std::string CheckLeaseRound(const std::vector<LeaseLog>& leases) {
    for (const auto& l : leases) {
      if (!l.error.empty()) return l.error;
      leases_granted_ += l.granted;
      lease_renewals_ += l.renewals;
      leases_expired_ += l.expired;
    }
    if (!leases.empty() && std::none_of(leases.begin(), leases.end(), [](const LeaseLog& l) {
          return l.renewals > 0 && l.expired > 0;
        })) {
      return "no lease was both renewed and seen to expire";
    }
    return "";
  }

  // Opens the round's bank with one Txn; *opened is the revision it made.
  std::string OpenBank(const std::string& prefix, int64_t* opened) {
    etcdserverpb::TxnRequest txn;
    for (int i = 0; i < kAccounts; ++i) {
      auto* put = txn.add_success()->mutable_request_put();
      put->set_key(AccountKey(prefix, i));
      put->set_value(std::to_string(kOpeningBalance));
    }
    int target = 0;
    // Retried until one answer: the Txn sets every account, so a second one changes nothing.
    bool done = WaitUntil(
        [&] {
          etcdserverpb::TxnResponse resp;
          grpc::Status st =
              cluster_->member(target).client().kv->Txn(Ctx(kOpTimeout).get(), txn, &resp);
          target = (target + 1) % n_;
          *opened = resp.header().revision();
          return st.ok();
        },
        kRecoveryTimeout, milliseconds(50));
    return done ? "" : "no member opened the bank";
  }

  // The bank clients saw only balanced banks and moved money; the bank is balanced at the end.
  std::string CheckBankRound(const std::string& prefix, const std::vector<BankLog>& banks) {
    for (const auto& b : banks) {
      if (!b.error.empty()) return b.error;
      transfers_ += b.transfers;
      transfer_conflicts_ += b.conflicts;
      transfers_unknown_ += b.unknown;
      bank_reads_ += b.reads + b.past_reads;
    }
    if (!banks.empty() && std::none_of(banks.begin(), banks.end(),
                                       [](const BankLog& b) { return b.transfers > 0; })) {
      return "no bank transfer succeeded";
    }
    etcdserverpb::RangeResponse resp;
    uint64_t call = 0, ret = 0;
    if (!ReadEventually(prefix + "bank/", prefix + "bank0", &resp, &call, &ret)) {
      return "no member answered the final read of the bank";
    }
    return CheckBank(resp, "at the end of the round");
  }

  // Every acknowledged insert is there with its value; nothing is there that nobody wrote.
  std::string CheckInserts(int round, const std::string& prefix,
                           const std::vector<ClientLog>& inserts) {
    const std::string from = prefix + "ins/";
    std::string to = from;
    to.back() = static_cast<char>(to.back() + 1);
    etcdserverpb::RangeResponse resp;
    uint64_t call = 0, ret = 0;
    if (!ReadEventually(from, to, &resp, &call, &ret)) {
      return "round " + std::to_string(round) + ": no member answered the read of the inserts";
    }
    std::map<std::string, std::string> present;
    for (const auto& kv : resp.kvs()) present[kv.key()] = kv.value();
    size_t acked = 0;
    for (const auto& log : inserts) {
      inserts_ok_ += log.puts_ok;
      inserts_unknown_ += log.puts_unknown;
      acked += log.acked.size();
      for (const auto& w : log.acked) {
        auto it = present.find(w.key);
        if (it == present.end()) {
          return "round " + std::to_string(round) + ": the acknowledged insert " + w.key +
                 " (revision " + std::to_string(w.revision) + ") is lost";
        }
        if (it->second != w.value) {
          return "round " + std::to_string(round) + ": " + w.key + " holds '" + it->second +
                 "', not the acknowledged '" + w.value + "'";
        }
        present.erase(it);
      }
      acked_.insert(acked_.end(), log.acked.begin(), log.acked.end());
    }
    for (const auto& log : inserts) {
      for (const auto& k : log.unknown_inserts) present.erase(k);
    }
    if (!present.empty()) {
      return "round " + std::to_string(round) + ": " + present.begin()->first +
             " is there but no client wrote it";
    }
    if (acked == 0) return "round " + std::to_string(round) + ": no insert was acknowledged";
    return "";
  }

  // The watcher reaches the last revision and saw each acknowledged write at its revision.
  std::string CheckWatcher(Watcher& watcher) {
    etcdserverpb::RangeResponse resp;
    uint64_t call = 0, ret = 0;
    if (!ReadEventually(kPrefix, "c0", &resp, &call, &ret)) {
      return "no member answered the last read";
    }
    const int64_t last = resp.header().revision();
    bool caught_up =
        WaitUntil([&] { return watcher.next_revision() > last || !watcher.error().empty(); },
                  kRecoveryTimeout, milliseconds(20));
    watcher.Stop();
    if (!watcher.error().empty()) return watcher.error();
    if (!caught_up) {
      return "the watcher did not reach revision " + std::to_string(last) + " (it expects " +
             std::to_string(watcher.next_revision()) + ")";
    }
    const auto& events = watcher.events();
    for (const auto& w : acked_) {
      auto it = events.find(w.revision);
      if (it == events.end() || std::find(it->second.begin(), it->second.end(),
                                          std::make_pair(w.key, w.value)) == it->second.end()) {
        return "the acknowledged write of " + w.key + "=" + w.value + " at revision " +
               std::to_string(w.revision) + " is not what the watcher saw at that revision";
      }
    }
    return "";
  }

  // A linearizable read of [key, end) through any member, retried until one answers.
  bool ReadEventually(const std::string& key, const std::string& end,
                      etcdserverpb::RangeResponse* resp, uint64_t* call, uint64_t* ret) {
    int target = 0;
    return WaitUntil(
        [&] {
          etcdserverpb::RangeRequest req;
          req.set_key(key);
          req.set_range_end(end);
          *call = clock_.Now();
          grpc::Status st =
              cluster_->member(target).client().kv->Range(Ctx(kOpTimeout).get(), req, resp);
          *ret = clock_.Now();
          target = (target + 1) % n_;
          return st.ok();
        },
        kRecoveryTimeout, milliseconds(50));
  }

  // The quiet time, the fault, the recovery; a failure of liveness returns what did not recover.
  std::string RunCycle(const PlannedFault& f) {
    std::this_thread::sleep_for(milliseconds(f.quiet_ms));
    const std::string cycle = "cycle " + std::to_string(f.cycle) + ": ";
    int leader = cluster_->WaitForLeader(kRecoveryTimeout);
    if (leader < 0) return cycle + "no leader before the fault";
    ExecutedFault e{clock_.Seconds(), f, cluster_->member(leader).name(), ""};
    ++faults_[static_cast<size_t>(f.kind)];
    std::string failure = Inject(f, leader, &e);
    proxy_->Heal();
    executed_.push_back(e);
    if (!failure.empty()) return cycle + failure;
    for (int i = 0; i < n_; ++i) {
      if (!cluster_->member(i).WaitReady(kRecoveryTimeout)) {
        return cycle + cluster_->member(i).name() + " was not ready again within " +
               std::to_string(kRecoveryTimeout.count()) + " ms";
      }
    }
    return "";
  }

  // The followers of `leader`, in member order.
  std::vector<int> Followers(int leader) const {
    std::vector<int> followers;
    for (int i = 0; i < n_; ++i) {
      if (i != leader) followers.push_back(i);
    }
    return followers;
  }
  std::string Names(const std::vector<int>& members) {
    std::string names;
    for (int i : members) names += (names.empty() ? "" : ",") + cluster_->member(i).name();
    return names;
  }

  // Carries out fault `f` against the cluster led by `leader` (e->member names the member it
  // hit); returns when it is over, before the links heal. A non-empty answer is a failure.
  std::string Inject(const PlannedFault& f, int leader, ExecutedFault* e) {
    const std::vector<int> followers = Followers(leader);
    const int picked = followers[f.pick % followers.size()];
    const int minority = (n_ - 1) / 2;
    switch (f.kind) {
      case FaultKind::kKillLeader:
      case FaultKind::kKillFollower: {
        Member& m = cluster_->member(f.kind == FaultKind::kKillLeader ? leader : picked);
        e->member = m.name();
        m.Kill();
        std::this_thread::sleep_for(milliseconds(f.hold_ms));
        e->note = "down " + std::to_string(f.hold_ms) + " ms";
        if (!m.Launch(cluster_->SettingsFor({}))) return m.name() + " did not start";
        return "";
      }
      case FaultKind::kPauseLeader:
        return PauseLeader(f, leader, e);
      case FaultKind::kIsolateLeader: {
        // The leader and minority-1 followers from the pick on, against the rest.
        std::vector<int> cut = {leader};
        for (int k = 0; k < minority - 1; ++k) {
          cut.push_back(followers[(f.pick + static_cast<uint32_t>(k)) % followers.size()]);
        }
        std::vector<int> rest;
        for (int i = 0; i < n_; ++i) {
          if (std::find(cut.begin(), cut.end(), i) == cut.end()) rest.push_back(i);
        }
        proxy_->Cut(cut, rest);
        auto cut_at = Clock::now();
        bool elected = WaitForLeaderAmong(rest, ids_[static_cast<size_t>(leader)]);
        e->member = Names(cut);
        e->note = "cut off from " + Names(rest) + "; " +
                  (elected ? "a new leader after " + MsSince(cut_at) : "no new leader");
        if (!elected) return "no new leader while " + Names(cut) + " were cut off";
        std::this_thread::sleep_for(milliseconds(f.hold_ms));
        return "";
      }
      case FaultKind::kIsolateFollowers: {
        std::vector<int> cut;
        for (int k = 0; k < minority; ++k) {
          cut.push_back(followers[(f.pick + static_cast<uint32_t>(k)) % followers.size()]);
        }
        std::vector<int> rest;
        for (int i = 0; i < n_; ++i) {
          if (std::find(cut.begin(), cut.end(), i) == cut.end()) rest.push_back(i);
        }
        proxy_->Cut(cut, rest);
        std::this_thread::sleep_for(milliseconds(f.hold_ms));
        e->member = Names(cut);
        e->note = "cut off " + std::to_string(f.hold_ms) + " ms";
        return "";
      }
      case FaultKind::kLoseLeaderOutgoing:
      case FaultKind::kLoseLeaderIncoming: {
        const bool outgoing = f.kind == FaultKind::kLoseLeaderOutgoing;
        for (int i : followers) {
          if (outgoing) {
            proxy_->Block(leader, i);
          } else {
            proxy_->Block(i, leader);
          }
        }
        std::this_thread::sleep_for(milliseconds(f.hold_ms));
        e->note = std::string(outgoing ? "sent" : "received") + " nothing for " +
                  std::to_string(f.hold_ms) + " ms (" + proxy_->Describe() + ")";
        return "";
      }
      case FaultKind::kBridge: {
        // Everyone but the bridge alternately into two halves that only the bridge links.
        std::vector<int> a, b;
        for (int i = 0, k = 0; i < n_; ++i) {
          if (i != picked) (k++ % 2 == 0 ? a : b).push_back(i);
        }
        proxy_->Cut(a, b);
        std::this_thread::sleep_for(milliseconds(f.hold_ms));
        e->member = cluster_->member(picked).name();
        e->note =
            "bridges " + Names(a) + " | " + Names(b) + " for " + std::to_string(f.hold_ms) + " ms";
        return "";
      }
      case FaultKind::kFlappingLink: {
        std::mt19937 rng(f.pick);
        int flips = 0;
        const auto until = Clock::now() + milliseconds(f.hold_ms);
        while (Clock::now() < until) {
          proxy_->Cut({leader}, {picked});
          std::this_thread::sleep_for(milliseconds(50 + rng() % 250));
          proxy_->Heal();
          std::this_thread::sleep_for(milliseconds(50 + rng() % 250));
          ++flips;
        }
        e->member += "<->" + cluster_->member(picked).name();
        e->note = std::to_string(flips) + " cuts in " + std::to_string(f.hold_ms) + " ms";
        return "";
      }
      case FaultKind::kSlowDisk: {
        Member& m = cluster_->member(f.pick % 2 == 0 ? leader : picked);
        const int delay_ms = 50 + static_cast<int>(f.pick % 451);
        WriteFile(SlowFsyncFile(m), std::to_string(delay_ms));
        std::this_thread::sleep_for(milliseconds(f.hold_ms));
        WriteFile(SlowFsyncFile(m), "0");
        e->member = m.name();
        e->note = "each fsync " + std::to_string(delay_ms) + " ms longer for " +
                  std::to_string(f.hold_ms) + " ms";
        return "";
      }
      case FaultKind::kReplaceFollower:
        return ReplaceFollower(f, leader, picked, /*as_learner=*/false, e);
      case FaultKind::kPromoteLearner:
        return ReplaceFollower(f, leader, picked, /*as_learner=*/true, e);
      case FaultKind::kFullDisk:
        return FullDisk(f, f.pick % 2 == 0 ? leader : picked, e);
      case FaultKind::kMoveLeader: {
        etcdserverpb::MoveLeaderRequest req;
        req.set_targetid(ids_[static_cast<size_t>(picked)]);
        etcdserverpb::MoveLeaderResponse resp;
        grpc::Status st = cluster_->member(leader).client().maintenance->MoveLeader(
            Ctx(milliseconds(5000)).get(), req, &resp);
        e->note = "to " + cluster_->member(picked).name() + ": " +
                  (st.ok() ? std::string("moved") : "refused, " + st.error_message());
        std::this_thread::sleep_for(milliseconds(f.hold_ms));
        return "";
      }
    }
    return "unknown fault";
  }

  // The disk of `victim` fills: its syncs fail with ENOSPC (the preloaded library). It must stop
  // as etcd does when its log cannot be synced, with exit status 1 (not a crash), before any
  // write it could not sync is acknowledged (the workload's checks); hold_ms after, with room on
  // its disk again, it restarts.
  std::string FullDisk(const PlannedFault& f, int victim, ExecutedFault* e) {
    Member& m = cluster_->member(victim);
    e->member = m.name();
    WriteFile(SlowFsyncFile(m), "enospc");
    const auto full_at = Clock::now();
    const std::optional<int> status = m.process().Wait(kRecoveryTimeout);
    const std::string stopped_after = MsSince(full_at);
    WriteFile(SlowFsyncFile(m), "0");
    if (!status) {
      return m.name() + " still ran " + stopped_after + " after its syncs began to fail";
    }
    if (*status != 1) {
      return m.name() + " stopped with exit status " + std::to_string(*status) +
             " on a full disk, not 1";
    }
    std::this_thread::sleep_for(milliseconds(f.hold_ms));
    e->note = "stopped with exit status 1 after " + stopped_after + "; restarted " +
              std::to_string(f.hold_ms) + " ms later";
    if (!m.Launch(cluster_->SettingsFor({}))) return m.name() + " did not start";
    return "";
  }

  // Removes follower `victim` from the cluster, wipes its data, adds it back as a new member
  // (a new ID, the same name and URLs) and starts it to join; `as_learner` adds it as a learner
  // and promotes it once the leader finds it caught up (MemberPromote, retried while refused).
  std::string ReplaceFollower(const PlannedFault& f, int leader, int victim, bool as_learner,
                              ExecutedFault* e) {
    Member& m = cluster_->member(victim);
    e->member = m.name();
    auto& admin = *cluster_->member(leader).client().cluster;
    etcdserverpb::MemberRemoveRequest remove;
    remove.set_id(ids_[static_cast<size_t>(victim)]);
    etcdserverpb::MemberRemoveResponse removed;
    grpc::Status st = admin.MemberRemove(Ctx(milliseconds(5000)).get(), remove, &removed);
    if (!st.ok()) {
      e->note = "not removed: " + st.error_message();
      return "";  // a leader that just lost its role may refuse: nothing changed
    }
    m.Kill();
    std::error_code ec;
    std::filesystem::remove_all(m.data_dir(), ec);
    etcdserverpb::MemberAddRequest add;
    add.add_peerurls(m.advertised_peer_url());
    add.set_islearner(as_learner);
    etcdserverpb::MemberAddResponse added;
    // Any member may take it; retried, as the leader may change meanwhile.
    int target = leader;
    bool ok = WaitUntil(
        [&] {
          if (target != victim) {
            st = cluster_->member(target).client().cluster->MemberAdd(Ctx(milliseconds(5000)).get(),
                                                                      add, &added);
            if (st.ok()) return true;
            // An earlier try that timed out may have added it after all.
            if (st.error_message().find("Peer URLs already exists") != std::string::npos) {
              return AddedMemberId(m, &added);
            }
          }
          target = (target + 1) % n_;
          return false;
        },
        kRecoveryTimeout, milliseconds(100));
    if (!ok) return "could not add " + m.name() + " back: " + st.error_message();
    const uint64_t id = added.member().id();
    ids_[static_cast<size_t>(victim)] = id;
    proxy_->SetMemberId(victim, id);
    if (!m.Launch(cluster_->SettingsFor({{"initial-cluster-state", "existing"}}))) {
      return m.name() + " did not start to join";
    }
    std::this_thread::sleep_for(milliseconds(f.hold_ms));
    e->note =
        "removed, wiped and added back as " + std::string(as_learner ? "learner " : "") + Hex(id);
    if (as_learner) return Promote(victim, id, e);
    return "";
  }

  // Promotes learner `learner` (ID `id`) through any voting member, retrying while the leader
  // finds it behind or the leader changes.
  std::string Promote(int learner, uint64_t id, ExecutedFault* e) {
    etcdserverpb::MemberPromoteRequest req;
    req.set_id(id);
    etcdserverpb::MemberPromoteResponse resp;
    grpc::Status st;
    int tries = 0;
    int target = (learner + 1) % n_;
    const auto start = Clock::now();
    bool ok = WaitUntil(
        [&] {
          ++tries;
          st = cluster_->member(target).client().cluster->MemberPromote(
              Ctx(milliseconds(5000)).get(), req, &resp);
          if (st.ok()) return true;
          // An earlier try that timed out may have promoted it after all.
          if (st.error_message() == "etcdserver: can only promote a learner member") return true;
          if (st.error_message().find("in sync with leader") == std::string::npos) {
            target = (target + 1) % n_;
            if (target == learner) target = (target + 1) % n_;
          }
          return false;
        },
        kRecoveryTimeout, milliseconds(100));
    if (!ok) return "could not promote learner " + Hex(id) + ": " + st.error_message();
    e->note += ", promoted after " + MsSince(start) + " (" + std::to_string(tries) + " tries)";
    return "";
  }

  // The ID under which `m`'s peer URL is in the member list, into added->member().
  bool AddedMemberId(Member& m, etcdserverpb::MemberAddResponse* added) {
    for (int i = 0; i < n_; ++i) {
      etcdserverpb::MemberListRequest req;
      etcdserverpb::MemberListResponse list;
      if (!cluster_->member(i)
               .client()
               .cluster->MemberList(Ctx(milliseconds(2000)).get(), req, &list)
               .ok()) {
        continue;
      }
      for (const auto& member : list.members()) {
        for (const auto& url : member.peerurls()) {
          if (url == m.advertised_peer_url()) {
            *added->mutable_member() = member;
            return true;
          }
        }
      }
    }
    return false;
  }

  static std::string Hex(uint64_t id) {
    std::ostringstream s;
    s << std::hex << id;
    return s.str();
  }

  // The file the preloaded library reads a member's fsync delay from.
  static std::string SlowFsyncFile(const Member& m) { return m.dir() + "/slow_fsync_ms"; }

  // SIGSTOP of the leader until another member leads, hold_ms more, then SIGCONT.
  std::string PauseLeader(const PlannedFault& f, int victim, ExecutedFault* e) {
    Member& m = cluster_->member(victim);
    const uint64_t paused_id = ids_[static_cast<size_t>(victim)];
    // A new election may have come between the leader's lookup and the signal.
    const bool still_leader = StatusOf(m).leader() == paused_id;
    m.process().Signal(SIGSTOP);
    auto paused_at = Clock::now();
    std::vector<int> others = Followers(victim);
    bool elected = WaitForLeaderAmong(others, paused_id);
    std::this_thread::sleep_for(milliseconds(f.hold_ms));
    m.process().Signal(SIGCONT);
    e->note =
        std::string(still_leader ? "" : "(no longer the leader) ") + "paused " + MsSince(paused_at);
    if (!elected) return "no new leader while " + m.name() + " was paused";
    return "";
  }

  // Waits until one of `members` reports a leader other than `old_leader_id`.
  bool WaitForLeaderAmong(const std::vector<int>& members, uint64_t old_leader_id) {
    return WaitUntil(
        [&] {
          for (int i : members) {
            etcdserverpb::StatusResponse st = StatusOf(cluster_->member(i));
            if (st.leader() != 0 && st.leader() != old_leader_id) return true;
          }
          return false;
        },
        kRecoveryTimeout, milliseconds(20));
  }

  static std::string MsSince(Clock::time_point t) {
    return std::to_string(std::chrono::duration_cast<milliseconds>(Clock::now() - t).count()) +
           " ms";
  }

  static etcdserverpb::StatusResponse StatusOf(Member& m) {
    etcdserverpb::StatusRequest req;
    etcdserverpb::StatusResponse resp;
    (void)m.client().maintenance->Status(Ctx(milliseconds(500)).get(), req, &resp);
    return resp;
  }

  CampaignOptions o_;
  std::vector<PlannedFault> plan_;
  HistoryClock clock_;
  int n_ = 0;  // members
  std::unique_ptr<PeerProxy> proxy_;
  std::unique_ptr<TestCluster> cluster_;
  std::vector<uint64_t> ids_;  // Raft IDs, by member
  std::vector<std::string> endpoints_;
  std::vector<ExecutedFault> executed_;
  std::vector<AckedWrite> acked_;
  std::array<int, kFaultKinds> faults_{};
  int cycles_done_ = 0;
  uint64_t register_ops_ = 0, puts_ok_ = 0, puts_unknown_ = 0, gets_ok_ = 0, gets_failed_ = 0;
  uint64_t cas_ok_ = 0, cas_failed_ = 0, cas_unknown_ = 0;
  uint64_t transfers_ = 0, transfer_conflicts_ = 0, transfers_unknown_ = 0, bank_reads_ = 0;
  uint64_t leases_granted_ = 0, lease_renewals_ = 0, leases_expired_ = 0;
  uint64_t inserts_ok_ = 0, inserts_unknown_ = 0, watch_events_ = 0, check_steps_ = 0;
  int watch_reconnects_ = 0;
};

}  // namespace

const char* FaultName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kKillLeader:
      return "kill-leader";
    case FaultKind::kKillFollower:
      return "kill-follower";
    case FaultKind::kPauseLeader:
      return "pause-leader";
    case FaultKind::kIsolateLeader:
      return "isolate-leader";
    case FaultKind::kIsolateFollowers:
      return "isolate-followers";
    case FaultKind::kLoseLeaderOutgoing:
      return "lose-leader-outgoing";
    case FaultKind::kLoseLeaderIncoming:
      return "lose-leader-incoming";
    case FaultKind::kBridge:
      return "bridge";
    case FaultKind::kFlappingLink:
      return "flapping-link";
    case FaultKind::kMoveLeader:
      return "move-leader";
    case FaultKind::kSlowDisk:
      return "slow-disk";
    case FaultKind::kReplaceFollower:
      return "replace-follower";
    case FaultKind::kFullDisk:
      return "full-disk";
    case FaultKind::kPromoteLearner:
      return "promote-learner";
  }
  return "?";
}

std::vector<PlannedFault> PlanFaults(uint64_t seed, int cycles,
                                     const std::vector<FaultKind>& kinds) {
  // The engine's output sequence is fixed by the standard; the draws below use only it.
  std::mt19937_64 rng(seed);
  std::vector<PlannedFault> plan;
  plan.reserve(static_cast<size_t>(std::max(cycles, 0)));
  for (int i = 0; i < cycles; ++i) {
    PlannedFault f;
    f.cycle = i;
    f.quiet_ms = 300 + static_cast<int>(rng() % 900);
    const uint64_t draw = rng();
    f.kind =
        kinds.empty() ? static_cast<FaultKind>(draw % kFaultKinds) : kinds[draw % kinds.size()];
    f.pick = static_cast<uint32_t>(rng() % 1'000'000);
    f.hold_ms = f.kind == FaultKind::kPauseLeader || f.kind == FaultKind::kIsolateLeader
                    ? 200 + static_cast<int>(rng() % 800)
                    : 200 + static_cast<int>(rng() % 1300);
    plan.push_back(f);
  }
  return plan;
}

std::string DescribePlan(const std::vector<PlannedFault>& plan) {
  std::ostringstream s;
  for (const auto& f : plan) {
    s << "  cycle " << f.cycle << ": after " << f.quiet_ms << " ms " << FaultName(f.kind)
      << " (pick " << f.pick << ")"
      << (f.kind == FaultKind::kPauseLeader || f.kind == FaultKind::kIsolateLeader
              ? ", until a new leader + "
              : ", for ")
      << f.hold_ms << " ms\n";
  }
  return s.str();
}

CampaignResult RunCampaign(const CampaignOptions& options) { return Campaign(options).Run(); }

}  // namespace etcdw::testing

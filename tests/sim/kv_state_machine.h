// The application replicated by the simulation: registers (key -> non-zero value; 0 means
// absent) plus the set of request ids already applied. The network may deliver a forwarded
// proposal twice, so the same put can be committed twice; like any Raft application that
// retries, the state machine applies a request id once and ignores later copies. Deterministic:
// the same committed entries give the same state, compared across members through Hash().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace etcdw::sim {

// The payload of a normal entry (empty data: a leader's no-op).
struct Command {
  enum class Kind { kNoop, kPut, kBarrier };
  Kind kind = Kind::kNoop;
  uint64_t request = 0;  // unique per client operation (kPut) or barrier (kBarrier)
  std::string key;
  int64_t value = 0;

  static std::string EncodePut(uint64_t request, const std::string& key, int64_t value);
  // A marker entry with no effect on the state: the simulation waits for every member to
  // apply one to know the cluster converged.
  static std::string EncodeBarrier(uint64_t n);
  // nullopt for malformed data.
  static std::optional<Command> Decode(const std::string& data);
};

class KvStateMachine {
 public:
  // Applies a put; returns false (and changes nothing) for a request id already applied.
  bool ApplyPut(const Command& c);
  int64_t Get(const std::string& key) const;
  bool Applied(uint64_t request) const { return requests_.count(request) > 0; }
  uint64_t Hash() const;

  // The snapshot of the state, as stored beside a Raft snapshot and sent with MsgSnap.
  std::string Serialize() const;
  static std::optional<KvStateMachine> Parse(const std::string& data);

 private:
  std::map<std::string, int64_t> kv_;
  std::set<uint64_t> requests_;
  uint64_t requests_hash_ = 0;  // order-independent digest of requests_
};

}  // namespace etcdw::sim

#include "sim/kv_state_machine.h"

#include <sstream>

namespace etcdw::sim {
namespace {

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xFF51AFD7ED558CCDULL;
  x ^= x >> 33;
  x *= 0xC4CEB9FE1A85EC53ULL;
  x ^= x >> 33;
  return x;
}

}  // namespace

std::string Command::EncodePut(uint64_t request, const std::string& key, int64_t value) {
  return "put " + std::to_string(request) + " " + key + " " + std::to_string(value);
}

std::string Command::EncodeBarrier(uint64_t n) { return "barrier " + std::to_string(n); }

std::optional<Command> Command::Decode(const std::string& data) {
  Command c;
  if (data.empty()) return c;
  std::istringstream in(data);
  std::string verb;
  in >> verb;
  if (verb == "put") {
    c.kind = Kind::kPut;
    in >> c.request >> c.key >> c.value;
  } else if (verb == "barrier") {
    c.kind = Kind::kBarrier;
    in >> c.request;
  } else {
    return std::nullopt;
  }
  if (in.fail()) return std::nullopt;
  return c;
}

bool KvStateMachine::ApplyPut(const Command& c) {
  if (!requests_.insert(c.request).second) return false;
  requests_hash_ ^= Mix(c.request);
  kv_[c.key] = c.value;
  return true;
}

int64_t KvStateMachine::Get(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? 0 : it->second;
}

uint64_t KvStateMachine::Hash() const {
  uint64_t h = Mix(requests_hash_ + requests_.size());
  for (const auto& [k, v] : kv_) {
    h = Mix(h ^ std::hash<std::string>()(k)) ^ Mix(static_cast<uint64_t>(v) + 0x51ED);
  }
  return h;
}

std::string KvStateMachine::Serialize() const {
  std::string s = std::to_string(kv_.size());
  for (const auto& [k, v] : kv_) s += " " + k + " " + std::to_string(v);
  s += " " + std::to_string(requests_.size());
  for (uint64_t r : requests_) s += " " + std::to_string(r);
  return s;
}

std::optional<KvStateMachine> KvStateMachine::Parse(const std::string& data) {
  KvStateMachine sm;
  if (data.empty()) return sm;
  std::istringstream in(data);
  size_t n = 0;
  in >> n;
  for (size_t i = 0; i < n && in; ++i) {
    std::string k;
    int64_t v = 0;
    in >> k >> v;
    sm.kv_[k] = v;
  }
  in >> n;
  for (size_t i = 0; i < n && in; ++i) {
    uint64_t r = 0;
    in >> r;
    sm.requests_.insert(r);
    sm.requests_hash_ ^= Mix(r);
  }
  if (in.fail()) return std::nullopt;
  return sm;
}

}  // namespace etcdw::sim

#include "etcdw/storage/meta_records.h"

#include <array>

namespace etcdw::storage::meta {

namespace {

constexpr std::array kRecords = {
    &kCurrentRev,    &kConsistentIndex, &kScheduledCompactRev, &kFinishedCompactRev,
    &kClusterId,     &kClusterMembers,  &kRemovedMembers,      &kAlarms,
    &kAuthEnabled,   &kAuthRevision,    &kAuthUsers,           &kAuthRoles,
    &kLocalMemberId, &kJoinMembers,     &kRestoredIdentity,    &kInstallingSnapshot,
    &kKeyIndexHead,  &kKeyIndexChunks,  &kLegacyHardState,     &kLegacyCompacted,
};

constexpr bool Covers(const Record& r, std::string_view key) {
  return r.family ? key.substr(0, r.key.size()) == r.key : key == r.key;
}

// No key may fall under two declarations: a reader must never have to choose.
constexpr bool Disjoint() {
  // By index: comparing the addresses of two objects is not a constant expression under the
  // sanitizers' instrumentation.
  for (size_t i = 0; i < kRecords.size(); ++i) {
    for (size_t j = 0; j < kRecords.size(); ++j) {
      const Record& a = *kRecords[i];
      const Record& b = *kRecords[j];
      if (i != j && (Covers(a, b.key) || Covers(b, a.key))) return false;
    }
  }
  return true;
}
static_assert(Disjoint(), "two meta record declarations cover the same key");

// FamilyEnd increments a family's last byte: '/' has a successor.
constexpr bool FamiliesEndInSlash() {
  for (const Record* r : kRecords) {
    if (r->family && (r->key.empty() || r->key.back() != '/')) return false;
  }
  return true;
}
static_assert(FamiliesEndInSlash(), "a family's prefix must end in '/'");

}  // namespace

std::span<const Record* const> AllRecords() { return kRecords; }

const Record* Find(std::string_view key) {
  for (const Record* r : kRecords) {
    if (Covers(*r, key)) return r;
  }
  return nullptr;
}

bool InSnapshot(std::string_view key) {
  const Record* r = Find(key);
  return r != nullptr && r->kind == Kind::kReplicated;
}

bool KeptOverSnapshot(std::string_view key) {
  const Record* r = Find(key);
  return r != nullptr && r->kind != Kind::kReplicated;
}

bool KeptByRestore(std::string_view key) {
  const Record* r = Find(key);
  return r != nullptr && r->kept_by_restore;
}

std::string KeyIn(const Record& family, std::string_view suffix) {
  std::string k(family.key);
  k.append(suffix);
  return k;
}

std::string FamilyEnd(const Record& family) {
  std::string end(family.key);
  end.back() = static_cast<char>(end.back() + 1);
  return end;
}

std::string Printable(std::string_view key) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : key) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f && b != '\\') {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 0xf]);
    }
  }
  return out;
}

}  // namespace etcdw::storage::meta

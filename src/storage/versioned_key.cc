#include "etcdw/storage/versioned_key.h"

#include <rocksdb/comparator.h>
#include <rocksdb/slice.h>

#include <cstring>

#include "etcdw/storage/engine.h"

namespace etcdw::storage {

std::string MakeVersionedKey(std::string_view user_key, uint64_t version) {
  std::string out;
  AppendVersionedKey(out, user_key, version);
  return out;
}

void AppendVersionedKey(std::string& out, std::string_view user_key, uint64_t version) {
  out.reserve(out.size() + user_key.size() + kVersionSuffixBytes);
  out.append(user_key);
  PutFixed64BE(out, version);
}

std::string_view UserKeyOf(std::string_view vkey) {
  return vkey.substr(0, vkey.size() - kVersionSuffixBytes);
}

uint64_t VersionOf(std::string_view vkey) {
  return DecodeFixed64BE(vkey.data() + vkey.size() - kVersionSuffixBytes);
}

namespace {

class VersionedComparator final : public rocksdb::Comparator {
 public:
  const char* Name() const override { return "etcdw.VersionedKey.v1"; }

  int Compare(const rocksdb::Slice& a, const rocksdb::Slice& b) const override {
    // Keys shorter than the suffix never occur in the column; compare them as bare user keys
    // so the comparator stays a total order whatever it is given.
    size_t ua = a.size() >= kVersionSuffixBytes ? a.size() - kVersionSuffixBytes : a.size();
    size_t ub = b.size() >= kVersionSuffixBytes ? b.size() - kVersionSuffixBytes : b.size();
    size_t n = ua < ub ? ua : ub;
    int r = n ? std::memcmp(a.data(), b.data(), n) : 0;
    if (r != 0) return r;
    if (ua != ub) return ua < ub ? -1 : 1;
    bool va = a.size() >= kVersionSuffixBytes, vb = b.size() >= kVersionSuffixBytes;
    if (!va || !vb) return va == vb ? 0 : (va ? 1 : -1);
    uint64_t x = DecodeFixed64BE(a.data() + ua), y = DecodeFixed64BE(b.data() + ub);
    if (x == y) return 0;
    return x > y ? -1 : 1;  // newer versions first
  }

  // Shortening index keys is an optimisation; leaving keys unchanged is always correct.
  void FindShortestSeparator(std::string*, const rocksdb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}
};

}  // namespace

const rocksdb::Comparator* VersionedKeyComparator() {
  static const VersionedComparator cmp;
  return &cmp;
}

}  // namespace etcdw::storage

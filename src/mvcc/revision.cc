#include "etcdw/mvcc/revision.h"

#include "etcdw/storage/engine.h"

namespace etcdw::mvcc {

std::string EncodeRevisionKey(Revision r) {
  std::string k;
  storage::PutFixed64BE(k, static_cast<uint64_t>(r.main));
  storage::PutFixed64BE(k, static_cast<uint64_t>(r.sub));
  return k;
}

Revision DecodeRevisionKey(std::string_view key) {
  return Revision{static_cast<int64_t>(storage::DecodeFixed64BE(key.data())),
                  static_cast<int64_t>(storage::DecodeFixed64BE(key.data() + 8))};
}

}  // namespace etcdw::mvcc

#include "store_listing.h"

#include "etcdw/common/logging.h"
#include "etcdw/sidecar/snap_store.h"

namespace etcdw::sidecar {

std::string ListingParent(const std::string& prefix) {
  const std::string v2 = V2Prefix(prefix);
  const size_t slash = v2.rfind('/');
  return slash == std::string::npos ? "" : v2.substr(0, slash);
}

void AddListedKey(std::string_view key, std::string_view parent, std::vector<SnapshotInfo>* out) {
  if (key.size() < parent.size()) return;
  std::string_view rest = key.substr(parent.size());
  if (rest.find("v1") == std::string_view::npos && rest.find("v2") == std::string_view::npos) {
    return;
  }
  Result<SnapshotInfo> s = ParseSnapshotKey(key);
  if (!s.ok()) {
    log::Warn("invalid snapshot found, ignoring it",
              {log::F("key", key), log::F("error", s.status().message())});
    return;
  }
  out->push_back(std::move(s).value());
}

}  // namespace etcdw::sidecar

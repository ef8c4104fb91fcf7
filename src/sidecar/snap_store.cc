#include "etcdw/sidecar/snap_store.h"

#include <cstdlib>

#include "etcdw/sidecar/abs_store.h"
#include "etcdw/sidecar/local_store.h"
#include "etcdw/sidecar/s3_store.h"

namespace etcdw::sidecar {

std::string V2Prefix(const std::string& prefix) {
  std::string p = prefix;
  while (!p.empty() && p.back() == '/') p.pop_back();
  return p.empty() ? "v2" : p + "/v2";
}

Result<std::unique_ptr<SnapStore>> OpenSnapStore(const SnapStoreOptions& options) {
  SnapStoreOptions o = options;
  if (o.container.empty()) {
    const char* env = std::getenv((o.env_prefix + "STORAGE_CONTAINER").c_str());
    if (env != nullptr) o.container = env;
  }
  if (o.provider == "Local") {
    // gardener: $HOME/<container>, container "default.bkp" when none is given.
    std::string container = o.container.empty() ? "default.bkp" : o.container;
    std::string root;
    if (!container.empty() && container.front() == '/') {
      root = container;
    } else {
      const char* home = std::getenv("HOME");
      if (home == nullptr || *home == '\0') {
        return InvalidArgument(
            "Local snapshot store: HOME is not set (the store lives under "
            "$HOME/<store-container>)");
      }
      root = std::string(home) + "/" + container;
    }
    return NewLocalStore(root, o.prefix);
  }
  if (o.provider == "S3") {
    if (o.container.empty()) {
      return InvalidArgument("S3 snapshot store: no bucket: set --store-container or " +
                             o.env_prefix + "STORAGE_CONTAINER");
    }
    return NewS3Store(o);
  }
  if (o.provider == "ABS") return NewAbsStore(o);
  return InvalidArgument("unsupported storage provider \"" + o.provider +
                         "\" (supported: Local, S3, ABS)");
}

}  // namespace etcdw::sidecar

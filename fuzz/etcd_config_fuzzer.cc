// Feeds the etcd configuration parser (the YAML of --config-file and of the sidecar's /config)
// arbitrary text, and validates what it accepts. A bad file must give an error, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "etcdw/common/config.h"
#include "etcdw/common/logging.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Unknown keys are logged; a fuzzer would print millions of lines.
  etcdw::log::SetLevel(etcdw::log::Level::kOff);
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto cfg = etcdw::common::ParseConfig(text, "fuzz.yaml");
  if (cfg.ok()) (void)etcdw::common::ValidateConfig(*cfg);
  return 0;
}

// A member of its own cluster, in-process, on loopback ports the kernel picks (tests run in
// parallel): for the tests of the member, the client API, the offline tools and the sidecar.
// Header-only; the test links the member library.
#pragma once

#include <memory>
#include <string>

#include "etcdw/common/clock.h"
#include "etcdw/common/config.h"
#include "etcdw/common/status.h"
#include "etcdw/member/etcd_server.h"
#include "support/await.h"

namespace etcdw::testsupport {

// Opens and starts the member of `data_dir` (named "t" unless `yaml` names it; `yaml` adds or
// overrides settings, one "key: value" per line) and waits until it has published its
// attributes, as a member does before it serves.
inline Result<std::unique_ptr<member::EtcdServer>> StartLocalMember(
    const std::string& data_dir, const std::string& yaml = "",
    const common::Clock& clock = common::SystemClock::Instance()) {
  const std::string name = yaml.find("name:") == std::string::npos ? "name: t\n" : "";
  auto cfg = common::ParseConfig(name + yaml + "\ndata-dir: " + data_dir +
                                     "\nlisten-peer-urls: http://127.0.0.1:0\n"
                                     "listen-client-urls: http://127.0.0.1:0\n",
                                 "test");
  if (!cfg.ok()) return cfg.status();
  ETCDW_RETURN_IF_ERROR(common::PrepareDataDir(*cfg));
  ETCDW_ASSIGN_OR_RETURN(auto server, member::EtcdServer::Open(*cfg, clock));
  ETCDW_RETURN_IF_ERROR(server->Start());
  if (!WaitUntil([&] { return server->Published(); })) {
    return Unavailable("the member did not publish its attributes");
  }
  return server;
}

}  // namespace etcdw::testsupport

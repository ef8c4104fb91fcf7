// gRPC's own log lines (e.g. a failed bind) go through our logger, so that everything on stderr
// stays one JSON object per line. Shared by both binaries.
#pragma once

namespace etcdw::cmd {

void RouteGrpcLogs();

}  // namespace etcdw::cmd

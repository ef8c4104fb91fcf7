// gRPC's own log lines (e.g. a failed bind) go through our logger, so that everything on stderr
// stays one JSON object per line. Shared by both binaries.
#pragma once

namespace etcdw::cmd {

void RouteGrpcLogs();

// Turns off Abseil's mutex deadlock detection, which Debian's Abseil (built without NDEBUG)
// leaves on: it records every lock acquisition of gRPC's mutexes in a global graph, a few per cent
// of the server's CPU time under load and a global lock all threads contend on.
void DisableMutexDeadlockDetection();

}  // namespace etcdw::cmd

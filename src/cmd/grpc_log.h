// gRPC's own log lines (e.g. a failed bind) go through our logger, so that everything on stderr
// stays one JSON object per line. Shared by both binaries.
#pragma once

namespace etcdw::cmd {

void RouteGrpcLogs();

// Turns off Abseil's mutex deadlock detection, which Debian's Abseil (built without NDEBUG)
// leaves on: it records every lock acquisition of gRPC's mutexes in a global graph, a few per cent
// of the server's CPU time under load and a global lock all threads contend on.
void DisableMutexDeadlockDetection();

// Makes gRPC clients notice a finished connection attempt within 100 ms. A channel whose last
// attempt failed fails calls at once while it reconnects, so no call polls for the new attempt;
// in a process without a gRPC server polling all the time (etcd-wrapper serves clients with its
// own server), the attempt's completion was seen only by gRPC's backup poller, every 5 s: the
// readiness check took 10-20 s to see a member that had been serving for as long. Must run
// before gRPC starts (it reads GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS once); a value in the
// environment wins.
void PollClientConnectionsPromptly();

}  // namespace etcdw::cmd

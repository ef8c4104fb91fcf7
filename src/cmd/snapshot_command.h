// `etcd-wrapper snapshot ...`: the offline snapshot tools, with etcdctl's (3.4) command line.
//
//   etcd-wrapper snapshot restore <file> [--data-dir DIR] [--name NAME] [--initial-cluster C]
//                                 [--initial-cluster-token T]
//                                 [--initial-advertise-peer-urls URLS] [--skip-hash-check]
//
// restore builds a new data directory of ours from a snapshot file: one `etcdctl snapshot save`
// wrote from etcd or from our server, a member's member/snap/db (with --skip-hash-check), or a
// full snapshot in our own format (data_dir::RestoreDataDir). The defaults and the exit codes are
// etcdctl's: --data-dir "<name>.etcd", --name "default", --initial-cluster
// "default=http://localhost:2380" (whatever --name is), --initial-cluster-token "etcd-cluster",
// --initial-advertise-peer-urls "http://localhost:2380"; exit 0 on success, 1 with "Error: ..."
// on stderr when the restore fails or a flag is unknown, 128 when the file argument is missing or
// repeated. `--wal-dir` is refused: our store keeps its log inside the data directory.
#pragma once

#include <string>
#include <vector>

namespace etcdw::cmd {

// Runs `etcd-wrapper snapshot <args...>`; returns the process exit code.
int RunSnapshotCommand(const std::vector<std::string>& args);

}  // namespace etcdw::cmd

// etcd-wrapper snapshot: see snapshot_command.h.
#include "snapshot_command.h"

#include <cstdio>
#include <string>
#include <vector>

#include "etcdw/common/flags.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/url.h"
#include "etcdw/data_dir/data_dir.h"

namespace etcdw::cmd {

namespace {

// etcdctl's exit codes (ctlv3/command/error.go).
constexpr int kExitError = 1;
constexpr int kExitBadArgs = 128;

constexpr char kSnapshotHelp[] =
    R"(etcd-wrapper snapshot: offline snapshot tools, with etcdctl's command line.

Usage:
  etcd-wrapper snapshot restore <filename> [options]
        Restores a snapshot into a new data directory: a file `etcdctl snapshot save` wrote
        (from etcd or from etcd-wrapper), a member's member/snap/db copied from an etcd data
        directory (with --skip-hash-check), or a full snapshot of etcd-wrapper's own format.
        Start etcd-wrapper on it with the same --name, --initial-cluster,
        --initial-cluster-token and --initial-advertise-peer-urls and
        initial-cluster-state "new".
)";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "Error: %s\n", message.c_str());
  return code;
}

int Restore(const std::vector<std::string>& args) {
  common::FlagSet flags("etcd-wrapper snapshot restore");
  std::string data_dir, wal_dir, name, initial_cluster, token, peer_urls;
  bool skip_hash_check = false;
  flags.String("data-dir", &data_dir, "", "Path to the data directory (default \"<name>.etcd\")");
  flags.String("wal-dir", &wal_dir, "", "Not supported: the log is kept in the data directory");
  flags.String("initial-cluster", &initial_cluster, "default=http://localhost:2380",
               "Initial cluster configuration for restore bootstrap");
  flags.String("initial-cluster-token", &token, "etcd-cluster",
               "Initial cluster token for the etcd cluster during restore bootstrap");
  flags.String("initial-advertise-peer-urls", &peer_urls, "http://localhost:2380",
               "List of this member's peer URLs to advertise to the rest of the cluster");
  flags.String("name", &name, "default", "Human-readable name for this member");
  flags.Bool("skip-hash-check", &skip_hash_check, false,
             "Ignore snapshot integrity hash value (required if copied from data directory)");

  // etcdctl (cobra) takes flags before and after the file name; Go's flag parsing stops at the
  // first argument that is not a flag, so the flags after the file are parsed in a second pass.
  std::vector<std::string> files;
  std::vector<std::string> rest = args;
  for (int pass = 0; pass < 2 && !rest.empty(); ++pass) {
    auto parsed = flags.Parse(rest);
    if (parsed.outcome == common::FlagSet::Outcome::kHelp) {
      std::printf("%s\nFlags of etcd-wrapper snapshot restore:\n%s", kSnapshotHelp,
                  flags.Usage().c_str());
      return 0;
    }
    if (parsed.outcome == common::FlagSet::Outcome::kError) return Fail(parsed.error, kExitError);
    rest.clear();
    if (parsed.positional.empty()) break;
    files.push_back(parsed.positional.front());
    rest.assign(parsed.positional.begin() + 1, parsed.positional.end());
  }
  if (files.size() != 1 || !rest.empty()) {
    return Fail("snapshot restore requires exactly one argument", kExitBadArgs);
  }
  if (!wal_dir.empty()) {
    return Fail("--wal-dir is not supported: etcd-wrapper keeps its log in the data directory",
                kExitError);
  }

  data_dir::RestoreTarget target;
  target.name = name;
  target.initial_cluster = initial_cluster;
  target.initial_cluster_token = token;
  target.initial_advertise_peer_urls = common::Split(peer_urls, ',');
  if (data_dir.empty()) data_dir = name + ".etcd";
  log::Info("restoring snapshot", {log::F("path", files[0]), log::F("data-dir", data_dir)});
  Status st = data_dir::RestoreDataDir(files[0], data_dir, target, skip_hash_check);
  if (!st.ok()) return Fail(st.message(), kExitError);
  return 0;
}

}  // namespace

int RunSnapshotCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
    std::fputs(kSnapshotHelp, args.empty() ? stderr : stdout);
    return args.empty() ? kExitBadArgs : 0;
  }
  if (args[0] == "restore") return Restore(std::vector<std::string>(args.begin() + 1, args.end()));
  return Fail("unknown command \"" + args[0] + "\" for \"etcd-wrapper snapshot\"", kExitError);
}

}  // namespace etcdw::cmd

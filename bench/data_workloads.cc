// Workloads about data at rest: memory after a bulk load, snapshot save and restore throughput,
// and cold start time with a large data set.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "proc_stats.h"
#include "workloads.h"

namespace etcdw::bench {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

uint64_t DirectoryBytes(const std::string& dir) {
  std::error_code ec;
  uint64_t sum = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) sum += it->file_size(ec);
  }
  return sum;
}

// Loads opts.rss_keys keys of 256 B, then reads the server's RSS.
Outcome MemoryAfterLoad(Target& target, const BenchOptions& opts) {
  const std::string value(256, 'm');
  std::string error;
  auto t0 = Clock::now();
  if (!BulkLoad(
          target, opts.rss_keys, [](uint64_t i) { return KeyName("/rss/", i); }, value, 8,
          &error)) {
    return Outcome{.error = error};
  }
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // let background work settle
  Outcome out;
  out.ok = true;
  std::string keys = std::to_string(opts.rss_keys / 1000) + "k";
  out.scalars = {
      {"RSS after " + keys + " keys of 256 B", "MiB", RssBytes(target.pids()) / kMiB, false},
      {"peak RSS while loading them", "MiB", PeakRssBytes(target.pids()) / kMiB, false},
      {"bulk load (Txns of 100 puts, 8 clients)", "keys/s",
       static_cast<double>(opts.rss_keys) / seconds, true},
      {"data directory after the load", "MiB", DirectoryBytes(target.member(0).data_dir()) / kMiB,
       false},
  };
  return out;
}

// Streams Maintenance.Snapshot into the file `path` (as `etcdctl snapshot save` does, without
// its fsync); returns bytes received or -1 with *error.
double SaveSnapshot(Target& target, const std::string& path, std::string* error) {
  auto maintenance = etcdserverpb::Maintenance::NewStub(target.NewChannel(0));
  auto ctx = NewContext(std::chrono::seconds(600));
  etcdserverpb::SnapshotRequest req;
  auto reader = maintenance->Snapshot(ctx.get(), req);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  etcdserverpb::SnapshotResponse chunk;
  double bytes = 0;
  while (reader->Read(&chunk)) {
    out.write(chunk.blob().data(), static_cast<std::streamsize>(chunk.blob().size()));
    bytes += static_cast<double>(chunk.blob().size());
  }
  auto st = reader->Finish();
  out.close();
  if (!st.ok() || !out) {
    *error = "snapshot: " + (st.ok() ? "cannot write " + path : st.error_message());
    return -1;
  }
  return bytes;
}

// A finished command's wall time and peak RSS (the child's ru_maxrss).
struct Measured {
  double seconds = -1;
  double peak_rss_bytes = 0;
};

// Runs `argv` with its output to `log`, measured; seconds < 0 with *error when it fails.
Measured RunMeasured(const std::vector<std::string>& argv, const std::string& log,
                     std::string* error) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  Measured m;
  auto t0 = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    *error = "fork failed";
    return m;
  }
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    *error = argv[0] + " failed:\n" + text;
    return m;
  }
  m.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  m.peak_rss_bytes = static_cast<double>(ru.ru_maxrss) * 1024.0;
  return m;
}

// Restores the snapshot file `snap` into a new data directory with the target's own tool:
// `etcdctl snapshot restore` for etcd, `etcd-wrapper snapshot restore` for ours (which reads
// the same bbolt format, so this is the import of an etcd snapshot into our data directory).
Measured RestoreSnapshot(Target& target, const std::string& snap, std::string* error) {
  const std::string dir = target.member(0).dir();
  const std::string out_dir = dir + "/restored.etcd";
  std::error_code ec;
  std::filesystem::remove_all(out_dir, ec);
  std::vector<std::string> argv = {"etcdctl"};
  if (target.member(0).kind() == Member::Kind::kEtcdWrapper) {
    argv = {testing::EtcdWrapperBinary()};
  }
  argv.insert(argv.end(), {"snapshot", "restore", snap, "--data-dir", out_dir});
  Measured m = RunMeasured(argv, dir + "/restore.log", error);
  std::filesystem::remove_all(out_dir, ec);
  return m;
}

// Restarts member 0 and times spawn to the first served serializable read of `key`.
double ColdStartSeconds(Target& target, const std::string& key, std::string* error) {
  Member& m = target.member(0);
  if (auto status = m.Stop(std::chrono::seconds(60)); !status) {
    *error = "did not stop in 60 s";
    return -1;
  }
  auto t0 = Clock::now();
  if (!m.Launch(BenchSettings())) {
    *error = "restart failed";
    return -1;
  }
  auto deadline = t0 + std::chrono::seconds(300);
  while (!testing::PortOpen(m.client_port())) {
    if (!m.Running() || Clock::now() > deadline) {
      *error = "did not listen after restart:\n" + m.log();
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto kv = etcdserverpb::KV::NewStub(m.NewChannel());
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  req.set_serializable(true);
  while (Clock::now() < deadline) {
    etcdserverpb::RangeResponse resp;
    auto ctx = NewContext(std::chrono::seconds(5));
    ctx->set_wait_for_ready(true);
    if (kv->Range(ctx.get(), req, &resp).ok() && resp.kvs_size() == 1) {
      return std::chrono::duration<double>(Clock::now() - t0).count();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  *error = "no read served in 300 s after restart";
  return -1;
}

// Loads opts.big_data_bytes in 8 KiB values, saves a snapshot, restarts the member.
Outcome BigData(Target& target, const BenchOptions& opts) {
  const std::string value(8192, 'b');
  uint64_t keys = opts.big_data_bytes / value.size();
  std::string error;
  if (!BulkLoad(
          target, keys, [](uint64_t i) { return KeyName("/big/", i); }, value, 4, &error)) {
    return Outcome{.error = error};
  }
  const std::string snap = target.member(0).dir() + "/bench-snapshot.db";
  const bool peak_reset = ResetPeakRss(target.pids());
  auto t0 = Clock::now();
  double bytes = SaveSnapshot(target, snap, &error);
  if (bytes < 0) return Outcome{.error = error};
  double snap_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double snap_peak = PeakRssBytes(target.pids());
  Measured restore = RestoreSnapshot(target, snap, &error);
  std::filesystem::remove(snap);
  if (restore.seconds < 0) return Outcome{.error = error};
  double cold = ColdStartSeconds(target, KeyName("/big/", keys - 1), &error);
  if (cold < 0) return Outcome{.error = error};
  Outcome out;
  out.ok = true;
  std::string size = std::to_string(opts.big_data_bytes >> 20) + " MiB";
  out.scalars = {
      {"snapshot save (" + size + " of values)", "MiB/s", bytes / kMiB / snap_seconds, true},
      {"snapshot size", "MiB", bytes / kMiB, false},
      {peak_reset ? "peak RSS while saving the snapshot" : "peak RSS (load and snapshot)", "MiB",
       snap_peak / kMiB, false},
      {"snapshot restore into a new data directory", "MiB/s", bytes / kMiB / restore.seconds, true},
      {"peak RSS of the snapshot restore", "MiB", restore.peak_rss_bytes / kMiB, false},
      {"cold start to first read (" + size + ")", "s", cold, false},
      {"RSS after the cold start's read", "MiB", RssBytes(target.pids()) / kMiB, false},
  };
  return out;
}

}  // namespace

std::vector<Workload> DataWorkloads() {
  return {
      {"memory", "bulk load of 256-byte values, then RSS", 1, MemoryAfterLoad},
      {"big-data",
       "bulk load of 8 KiB values, snapshot save, snapshot restore, restart to first read", 1,
       BigData},
  };
}

}  // namespace etcdw::bench

#include "etcdw/sidecar/copier.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "etcdw/common/hash.h"
#include "etcdw/common/logging.h"
#include "file_util.h"

namespace etcdw::sidecar {

namespace fs = std::filesystem;
using Clock = std::chrono::system_clock;

namespace {

constexpr std::string_view kFinalSuffix = ".final";
// gardener's copier looks for a final snapshot among the newest four fulls: a regular, a
// start-up or a stop-time full snapshot may race the final one and land after it.
constexpr size_t kFinalSearchDepth = 4;

bool Cancelled(const CopyOptions& o) {
  return o.cancel != nullptr && o.cancel->load(std::memory_order_relaxed);
}

// A file's size and SHA-256: what must be equal on both sides of a copy.
struct Digest {
  int64_t size = 0;
  std::array<uint8_t, 32> sha256{};
  bool operator==(const Digest&) const = default;
};

Result<Digest> DigestOf(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open \"" + path + "\"", errno);
  Digest d;
  common::Sha256 sha;
  std::string buf(1 << 20, '\0');
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoError("read \"" + path + "\"", err);
    }
    if (n == 0) break;
    sha.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
    d.size += n;
  }
  ::close(fd);
  d.sha256 = sha.Final();
  return d;
}

// A private directory for the downloads, "<parent>/etcdbrctl-copy-<pid>-XXXXXX", removed with
// everything in it at the end. A copy killed before its end leaves its directory: Make removes
// those of processes that are gone (or of an earlier process with this pid: in a container,
// each run of the job has the same pid).
class WorkDir {
 public:
  static Result<std::unique_ptr<WorkDir>> Make(const std::string& parent) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) {
      return Internal("create the temporary directory \"" + parent + "\": " + ec.message());
    }
    RemoveAbandoned(parent);
    std::string tmpl =
        JoinPath(parent, std::string(kPrefix) + std::to_string(::getpid()) + "-XXXXXX");
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return ErrnoError("create a directory in \"" + parent + "\"", errno);
    }
    return std::unique_ptr<WorkDir>(new WorkDir(std::move(tmpl)));
  }
  ~WorkDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  static constexpr std::string_view kPrefix = "etcdbrctl-copy-";

  explicit WorkDir(std::string path) : path_(std::move(path)) {}

  static void RemoveAbandoned(const std::string& parent) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(parent, ec)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with(kPrefix)) continue;
      const std::string pid_text =
          name.substr(kPrefix.size(), name.find('-', kPrefix.size()) - kPrefix.size());
      if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos ||
          pid_text.size() > 9) {
        continue;
      }
      const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
      if (pid != ::getpid() && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;  // running
      std::error_code rm_ec;
      fs::remove_all(entry.path(), rm_ec);
      log::Warn("removed the directory of a copy that did not finish",
                {log::F("path", entry.path().string()), log::F("removed", !rm_ec)});
    }
  }

  std::string path_;
};

// Runs job(i, worker) for i in [0, n) on up to `threads` threads; worker is the thread's
// number (for its own file names). Stops handing out work once `options` is cancelled.
template <typename Job>
void RunParallel(size_t n, int64_t threads, const CopyOptions& options, const Job& job) {
  std::atomic<size_t> next{0};
  auto work = [&](int worker) {
    for (size_t i = next++; i < n && !Cancelled(options); i = next++) job(i, worker);
  };
  const size_t count = std::min<size_t>(n, static_cast<size_t>(std::max<int64_t>(threads, 1)));
  std::vector<std::thread> pool;
  for (size_t w = 1; w < count; ++w) pool.emplace_back(work, static_cast<int>(w));
  work(0);
  for (auto& t : pool) t.join();
}

// Polls the source until one of its newest full snapshots is final; false on timeout.
Result<bool> WaitForFinalSnapshot(SnapStore& source, const CopyOptions& options) {
  using Steady = std::chrono::steady_clock;
  const auto deadline = Steady::now() + options.wait_timeout;
  for (;;) {
    ETCDW_ASSIGN_OR_RETURN(std::vector<SnapshotInfo> list, source.List());
    size_t fulls = 0;
    for (auto it = list.rbegin(); it != list.rend() && fulls < kFinalSearchDepth; ++it) {
      if (it->is_chunk || it->kind != SnapshotKind::kFull) continue;
      ++fulls;
      if (it->is_final) {
        log::Info("final full snapshot found in the source", {log::F("snapshot", it->snap_name)});
        return true;
      }
    }
    // Sleeps in short steps so that a cancellation is seen promptly.
    const auto wake = Steady::now() + options.poll_interval;
    while (Steady::now() < wake) {
      if (Cancelled(options)) return Status(Code::kCanceled, "copy cancelled");
      if (options.wait_timeout.count() > 0 && Steady::now() >= deadline) return false;
      std::this_thread::sleep_for(
          std::min<Steady::duration>(wake - Steady::now(), std::chrono::milliseconds(100)));
    }
    if (options.wait_timeout.count() > 0 && Steady::now() >= deadline) return false;
  }
}

std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

}  // namespace

std::vector<SnapshotInfo> SelectBackupsToCopy(const std::vector<SnapshotInfo>& sorted,
                                              int64_t max_backups,
                                              std::optional<Clock::time_point> not_before) {
  struct Backup {
    SnapshotInfo full;
    std::vector<SnapshotInfo> deltas;  // newest first
  };
  std::vector<Backup> backups;  // newest full first
  std::vector<SnapshotInfo> deltas;
  for (auto it = sorted.rbegin(); it != sorted.rend(); ++it) {
    if (it->is_chunk) continue;
    if (it->kind == SnapshotKind::kIncr) {
      deltas.push_back(*it);
      continue;
    }
    backups.push_back({*it, std::move(deltas)});
    deltas.clear();
  }
  // Deltas left in `deltas` are older than the oldest full: part of no backup.
  std::stable_sort(backups.begin(), backups.end(), [](const Backup& a, const Backup& b) {
    return a.full.created_on > b.full.created_on;
  });
  std::vector<SnapshotInfo> out;
  int64_t taken = 0;
  for (auto& b : backups) {
    if (max_backups >= 0 && taken == max_backups) break;
    if (not_before && b.full.created_on < *not_before) continue;
    out.push_back(std::move(b.full));
    for (auto& d : b.deltas) out.push_back(std::move(d));
    ++taken;
  }
  return out;
}

std::string CopyName(const SnapshotInfo& s) {
  std::string name = s.snap_name;
  if (name.ends_with(kFinalSuffix)) name.resize(name.size() - kFinalSuffix.size());
  return name;
}

Result<CopyReport> CopyBackups(SnapStore& source, SnapStore& destination,
                               const CopyOptions& options, Clock::time_point now) {
  CopyReport report;
  if (options.wait_for_final) {
    log::Info("waiting for a final full snapshot in the source",
              {log::F("source", source.Describe())});
    ETCDW_ASSIGN_OR_RETURN(report.found_final, WaitForFinalSnapshot(source, options));
    if (!report.found_final) {
      log::Info("timed out waiting for a final full snapshot; copying what there is");
    }
  }

  auto listed = source.List();
  if (!listed.ok()) return listed.status().WithContext("listing the source store");
  std::optional<Clock::time_point> not_before;
  if (options.max_backup_age_days >= 0) {
    not_before = now - std::chrono::hours(24) * options.max_backup_age_days;
  }
  const std::vector<SnapshotInfo> selected =
      SelectBackupsToCopy(*listed, options.max_backups, not_before);
  if (selected.empty()) {
    log::Info("no backups to copy in the source", {log::F("source", source.Describe())});
    return report;
  }

  auto present = destination.List();
  if (!present.ok()) return present.status().WithContext("listing the destination store");
  std::set<std::string> present_names;
  for (const auto& s : *present) present_names.insert(s.snap_name);
  std::vector<SnapshotInfo> to_copy;
  for (const auto& s : selected) {
    if (present_names.count(CopyName(s)) != 0) {
      log::Info("skipping a snapshot the destination has",
                {log::F("kind", KindName(s.kind)), log::F("snapshot", s.snap_name)});
      report.skipped.push_back(CopyName(s));
    } else {
      to_copy.push_back(s);
    }
  }
  if (to_copy.empty()) return report;

  ETCDW_ASSIGN_OR_RETURN(std::unique_ptr<WorkDir> work, WorkDir::Make(options.temp_dir));
  std::mutex mu;
  std::vector<std::string> errors;
  std::map<std::string, Digest> uploaded;  // destination name -> what the source gave
  RunParallel(to_copy.size(), options.max_parallel, options, [&](size_t i, int worker) {
    const SnapshotInfo& s = to_copy[i];
    const std::string file = JoinPath(work->path(), std::to_string(worker) + ".download");
    SnapshotInfo target = NewSnapshot(s.kind, s.start_revision, s.last_revision, s.created_on,
                                      s.compression_suffix, false);
    target.snap_name = CopyName(s);
    log::Info("copying a snapshot",
              {log::F("kind", KindName(s.kind)), log::F("snapshot", s.snap_name)});
    Status st = source.Fetch(s, file).WithContext("fetch from the source");
    Result<Digest> digest = st.ok() ? DigestOf(file) : Result<Digest>(st);
    if (digest.ok()) st = destination.Save(target, file).WithContext("save to the destination");
    ::unlink(file.c_str());
    std::lock_guard<std::mutex> lock(mu);
    if (!digest.ok() || !st.ok()) {
      errors.push_back(s.snap_name + ": " + (st.ok() ? digest.status() : st).message());
      return;
    }
    uploaded.emplace(target.snap_name, *digest);
  });

  // Verification: every uploaded object is listed under its name and reads back as the bytes
  // the source gave. A copy that differs is removed, so that a rerun copies it again.
  auto after = destination.List();
  if (!after.ok()) {
    return after.status().WithContext("listing the destination store after the copy");
  }
  std::vector<SnapshotInfo> to_check;
  std::set<std::string> listed_after;
  for (const auto& s : *after) {
    if (uploaded.count(s.snap_name) != 0 && listed_after.insert(s.snap_name).second) {
      to_check.push_back(s);
    }
  }
  for (const auto& entry : uploaded) {
    if (listed_after.count(entry.first) == 0) {
      errors.push_back(entry.first + ": not listed by the destination after its upload");
    }
  }
  RunParallel(to_check.size(), options.max_parallel, options, [&](size_t i, int worker) {
    const SnapshotInfo& s = to_check[i];
    const std::string file = JoinPath(work->path(), std::to_string(worker) + ".check");
    Status st = destination.Fetch(s, file).WithContext("read back from the destination");
    Result<Digest> digest = st.ok() ? DigestOf(file) : Result<Digest>(st);
    ::unlink(file.c_str());
    std::lock_guard<std::mutex> lock(mu);
    const Digest& want = uploaded.at(s.snap_name);
    if (!digest.ok()) {
      errors.push_back(s.snap_name + ": " + digest.status().message());
    } else if (!(*digest == want)) {
      errors.push_back(
          s.snap_name + ": the copy differs from the source (" + std::to_string(digest->size) +
          " bytes, SHA-256 " +
          common::ToHex(
              std::string_view(reinterpret_cast<const char*>(digest->sha256.data()), 32)) +
          "; the source's " + std::to_string(want.size) + " bytes, SHA-256 " +
          common::ToHex(std::string_view(reinterpret_cast<const char*>(want.sha256.data()), 32)) +
          "); removed it");
      Status del = destination.Delete(s);
      if (!del.ok()) errors.back() += " failed: " + del.message();
    } else {
      report.copied.push_back(s.snap_name);
      log::Info("copied a snapshot",
                {log::F("kind", KindName(s.kind)), log::F("snapshot", s.snap_name)});
    }
  });
  std::sort(report.copied.begin(), report.copied.end());
  if (Cancelled(options)) return Status(Code::kCanceled, "copy cancelled");
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    return Internal(std::to_string(errors.size()) + " of " + std::to_string(to_copy.size()) +
                    " snapshots were not copied:\n" + JoinLines(errors));
  }
  return report;
}

}  // namespace etcdw::sidecar

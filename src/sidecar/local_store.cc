#include "etcdw/sidecar/local_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "etcdw/common/dir_sync.h"
#include "etcdw/common/logging.h"

namespace etcdw::sidecar {
namespace {

namespace fs = std::filesystem;

// A temporary upload file untouched for this long belongs to an upload that crashed.
constexpr auto kAbandonedUploadAge = std::chrono::hours(1);

Status ErrnoStatus(const std::string& what, int err) {
  Code code = err == ENOENT ? Code::kNotFound : Code::kInternal;
  return Status(code, what + ": " + std::strerror(err));
}

// Closes a file descriptor when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now, reporting the error close() may carry (deferred write-back failures).
  Status Close(const std::string& path) {
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return ErrnoStatus("close " + path, errno);
    return Status::Ok();
  }

 private:
  int fd_;
};

// Creates `dir` and its missing parents with mode 0700 (existing directories are left as they
// are).
Status MakeDirs(const std::string& dir) {
  std::string path;
  size_t pos = 0;
  while (pos <= dir.size()) {
    size_t next = dir.find('/', pos);
    if (next == std::string::npos) next = dir.size();
    path = dir.substr(0, next);
    pos = next + 1;
    if (path.empty() || path.back() == '/') continue;
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return ErrnoStatus("create directory " + path, errno);
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoStatus("stat " + dir, errno);
  if (!S_ISDIR(st.st_mode)) return Internal(dir + " exists and is not a directory");
  return Status::Ok();
}

// Copies all bytes of `in` to `out`.
Status CopyData(int in, const std::string& in_path, int out, const std::string& out_path) {
  std::vector<char> buf(1 << 20);
  while (true) {
    ssize_t n = ::read(in, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + in_path, errno);
    }
    if (n == 0) return Status::Ok();
    const char* p = buf.data();
    while (n > 0) {
      ssize_t w = ::write(out, p, static_cast<size_t>(n));
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("write " + out_path, errno);
      }
      p += w;
      n -= w;
    }
  }
}

// A relative path whose components are neither empty, "." nor "..": it cannot leave the store.
bool IsSafeRelative(std::string_view p) {
  if (p.empty() || p.front() == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    std::string_view c = p.substr(start, end - start);
    if (c.empty() || c == "." || c == "..") return false;
    start = end + 1;
  }
  return true;
}

std::string StripSlashes(std::string p) {
  while (!p.empty() && p.back() == '/') p.pop_back();
  while (!p.empty() && p.front() == '/') p.erase(p.begin());
  return p;
}

class LocalStore : public SnapStore {
 public:
  LocalStore(std::string root, std::string prefix)
      : root_(std::move(root)),
        prefix_(StripSlashes(std::move(prefix))),
        v2_(StripSlashes(V2Prefix(prefix_))) {}

  // The directory the store owns, created at construction.
  std::string V2Dir() const { return root_ + "/" + v2_; }
  // The directory List walks: the parent of v2, where legacy v1 backups live too.
  std::string ListDir() const { return prefix_.empty() ? root_ : root_ + "/" + prefix_; }

  Result<std::vector<SnapshotInfo>> List() override {
    std::vector<std::string> keys;
    std::error_code ec;
    fs::path base(ListDir());
    bool exists = fs::exists(base, ec);
    if (ec) return Internal("list " + Describe() + ": " + base.string() + ": " + ec.message());
    if (!exists) return std::vector<SnapshotInfo>{};
    fs::recursive_directory_iterator it(base, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      std::error_code type_ec;
      if (!it->is_regular_file(type_ec)) continue;
      std::string rel = it->path().lexically_relative(root_).generic_string();
      std::string name = it->path().filename().string();
      if (!name.empty() && name.front() == '.') {
        // Temporary files of uploads in progress (or of crashed ones); never snapshots. An
        // upload writes its file continuously, so one untouched for an hour was abandoned by a
        // crash: removed, or crashed uploads would fill the volume over time.
        std::error_code time_ec;
        auto written = fs::last_write_time(it->path(), time_ec);
        if (!time_ec && name.find(".tmp.") != std::string::npos &&
            fs::file_time_type::clock::now() - written > kAbandonedUploadAge) {
          std::error_code rm_ec;
          fs::remove(it->path(), rm_ec);
          log::Warn("Local store: removed the temporary file of an abandoned upload",
                    {log::F("key", rel), log::F("removed", !rm_ec)});
        }
        continue;
      }
      keys.push_back(std::move(rel));
    }
    if (ec) return Internal("list " + Describe() + ": walk " + base.string() + ": " + ec.message());
    std::sort(keys.begin(), keys.end());
    std::vector<SnapshotInfo> list;
    for (const std::string& key : keys) {
      if (key.find("v1") == std::string::npos && key.find("v2") == std::string::npos) {
        // Not under a backup-version directory: no snapshot candidate (gardener is silent too).
        log::Debug("Local store: skipping non-snapshot file", {log::F("key", key)});
        continue;
      }
      Result<SnapshotInfo> s = ParseSnapshotKey(key);
      if (!s.ok()) {
        log::Warn("Invalid snapshot found, ignoring it",
                  {log::F("key", key), log::F("error", s.status())});
        continue;
      }
      list.push_back(std::move(s).value());
    }
    SortSnapshots(list);
    return list;
  }

  Status Fetch(const SnapshotInfo& s, const std::string& dest) override {
    ETCDW_ASSIGN_OR_RETURN(std::string src, ObjectPath(s));
    Fd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0) return ErrnoStatus("fetch " + SnapshotKey(s) + ": open " + src, errno);
    Fd out(::open(dest.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (out.get() < 0) return ErrnoStatus("fetch " + SnapshotKey(s) + ": open " + dest, errno);
    ETCDW_RETURN_IF_ERROR(CopyData(in.get(), src, out.get(), dest));
    return out.Close(dest);
  }

  Status Save(const SnapshotInfo& s, const std::string& src) override {
    if (!IsSafeRelative(s.snap_name)) {
      return InvalidArgument("save to " + Describe() + ": invalid snapshot name \"" + s.snap_name +
                             "\"");
    }
    std::string target = V2Dir() + "/" + s.snap_name;
    std::string dir = target.substr(0, target.rfind('/'));
    ETCDW_RETURN_IF_ERROR(MakeDirs(dir));
    Fd in(::open(src.c_str(), O_RDONLY | O_CLOEXEC));
    if (in.get() < 0) return ErrnoStatus("save " + s.snap_name + ": open " + src, errno);

    // The temporary file lives in the target directory so that rename() is atomic; its name
    // starts with '.' so that List never takes it for a snapshot.
    std::string tmp = dir + "/." + target.substr(dir.size() + 1) + ".tmp.XXXXXX";
    Fd out(::mkostemp(tmp.data(), O_CLOEXEC));
    if (out.get() < 0) return ErrnoStatus("save " + s.snap_name + ": create temp file", errno);
    Status st = CopyData(in.get(), src, out.get(), tmp);
    if (st.ok() && ::fsync(out.get()) != 0) st = ErrnoStatus("fsync " + tmp, errno);
    if (st.ok()) st = out.Close(tmp);
    if (st.ok() && ::rename(tmp.c_str(), target.c_str()) != 0) {
      st = ErrnoStatus("rename " + tmp + " to " + target, errno);
    }
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return st.WithContext("save " + s.snap_name + " to " + Describe());
    }
    return common::SyncDirectory(dir);
  }

  Status Delete(const SnapshotInfo& s) override {
    ETCDW_ASSIGN_OR_RETURN(std::string path, ObjectPath(s));
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus("delete " + SnapshotKey(s) + ": remove " + path, errno);
    }
    // Remove the directory the object leaves behind (a v1 Backup-<ts> directory, a chunk's
    // directory) when it is now empty; the store's own directories stay. Failure (not empty)
    // is expected and ignored.
    std::string dir = path.substr(0, path.rfind('/'));
    if (dir != root_ && dir != V2Dir() && dir != ListDir()) ::rmdir(dir.c_str());
    return Status::Ok();
  }

  std::string Describe() const override { return "Local store " + V2Dir(); }

 private:
  // The file of snapshot `s`: root/<prefix>/[<snap dir>/]<name>; a snapshot without a prefix
  // (just taken, not listed) is in this store's v2 directory.
  Result<std::string> ObjectPath(const SnapshotInfo& s) const {
    std::string rel = s.prefix.empty() ? v2_ + "/" : s.prefix;
    if (!s.snap_dir.empty()) rel += s.snap_dir + "/";
    rel += s.snap_name;
    if (!IsSafeRelative(rel)) {
      return InvalidArgument(Describe() + ": invalid snapshot key \"" + rel + "\"");
    }
    return root_ + "/" + rel;
  }

  const std::string root_;
  const std::string prefix_;  // without leading or trailing '/'
  const std::string v2_;      // V2Prefix(prefix_)
};

}  // namespace

Result<std::unique_ptr<SnapStore>> NewLocalStore(const std::string& root,
                                                 const std::string& prefix) {
  std::string r = root;
  while (r.size() > 1 && r.back() == '/') r.pop_back();
  if (r.empty()) return InvalidArgument("Local snapshot store: empty root directory");
  std::string p = StripSlashes(prefix);
  if (!p.empty() && !IsSafeRelative(p)) {
    return InvalidArgument("Local snapshot store: invalid store prefix \"" + prefix +
                           "\" (empty, \".\" or \"..\" path components)");
  }
  auto store = std::make_unique<LocalStore>(r, prefix);
  ETCDW_RETURN_IF_ERROR(MakeDirs(store->V2Dir()).WithContext("Local snapshot store"));
  return std::unique_ptr<SnapStore>(std::move(store));
}

}  // namespace etcdw::sidecar

#include "etcdw/mvcc/etcd_export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <queue>
#include <utility>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcd/mvccpb/kv.pb.h"
#include "etcdw/bbolt/writer.h"
#include "etcdw/common/hash.h"
#include "etcdw/common/varint.h"
#include "etcdw/internal.pb.h"
#include "etcdw/mvcc/lease_table.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/versioned_key.h"

namespace etcdw::mvcc {

using storage::Column;

namespace {

// What a sorted record costs in memory besides its bytes (the std::string and vector slot).
constexpr size_t kRecordOverhead = sizeof(std::string) + 16;

std::string Be64(uint64_t v) { return storage::EncodeFixed64BE(v); }

// etcd's revision key: be64 main, '_', be64 sub, and 't' for a deletion.
std::string EtcdRevisionKey(int64_t main, int64_t sub, bool tombstone) {
  std::string k = Be64(static_cast<uint64_t>(main));
  k.push_back('_');
  k += Be64(static_cast<uint64_t>(sub));
  if (tombstone) k.push_back('t');
  return k;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

// A JSON string as Go's encoding/json writes one (quotes, backslashes, control characters, and
// the HTML characters Go escapes by default).
std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == '<' || c == '>' || c == '&') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out + "\"";
}

std::string JsonStrings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + JsonString(v[i]);
  return out + "]";
}

// etcd 3.4's membership.Member as json.Marshal writes it: id, peerURLs, then the omitempty
// fields isLearner, name, clientURLs.
std::string MemberJson(const EtcdExportMember& m) {
  std::string j = "{\"id\":" + std::to_string(m.id) + ",\"peerURLs\":" + JsonStrings(m.peer_urls);
  if (m.is_learner) j += ",\"isLearner\":true";
  if (!m.name.empty()) j += ",\"name\":" + JsonString(m.name);
  if (!m.client_urls.empty()) j += ",\"clientURLs\":" + JsonStrings(m.client_urls);
  return j + "}";
}

// leasepb.Lease: three int64 varint fields, zero ones left out (proto3).
std::string EtcdLeaseBytes(const LeaseInfo& l) {
  std::string out;
  const std::pair<int, int64_t> fields[] = {{1, l.id}, {2, l.ttl}, {3, l.remaining_ttl}};
  for (const auto& [number, value] : fields) {
    if (value == 0) continue;
    common::AppendVarint(out, static_cast<uint64_t>(number) << 3);
    common::AppendVarint(out, static_cast<uint64_t>(value));
  }
  return out;
}

Status Errno(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

// One sorted run of (be64 main + key) records spilled to a file: u32 length, bytes.
class RunFile {
 public:
  static Result<std::unique_ptr<RunFile>> Write(const std::string& path,
                                                const std::vector<std::string>& records) {
    std::unique_ptr<RunFile> run(new RunFile(path));
    run->f_ = std::fopen(path.c_str(), "w+xb");
    if (run->f_ == nullptr) return Errno("export sort run \"" + path + "\"");
    for (const auto& r : records) {
      const auto n = static_cast<uint32_t>(r.size());
      if (std::fwrite(&n, sizeof n, 1, run->f_) != 1 ||
          std::fwrite(r.data(), 1, r.size(), run->f_) != r.size()) {
        return Errno("writing export sort run \"" + path + "\"");
      }
    }
    if (std::fflush(run->f_) != 0 || std::fseek(run->f_, 0, SEEK_SET) != 0) {
      return Errno("rewinding export sort run \"" + path + "\"");
    }
    return run;
  }
  ~RunFile() {
    if (f_ != nullptr) std::fclose(f_);
    std::remove(path_.c_str());
  }
  // The next record into `out`; false at the end.
  Result<bool> Next(std::string& out) {
    uint32_t n = 0;
    if (std::fread(&n, sizeof n, 1, f_) != 1) {
      if (std::feof(f_)) return false;
      return Errno("reading export sort run \"" + path_ + "\"");
    }
    out.resize(n);
    if (std::fread(out.data(), 1, n, f_) != n) {
      return DataLoss("export sort run \"" + path_ + "\" is cut short");
    }
    return true;
  }

 private:
  explicit RunFile(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::FILE* f_ = nullptr;
};

class Exporter {
 public:
  Exporter(const storage::Engine& engine, const storage::Snapshot& snapshot, std::string path,
           const EtcdExportOptions& options)
      : engine_(engine), snapshot_(snapshot), path_(std::move(path)), options_(options) {
    ro_.snapshot = &snapshot_;
    ro_.fill_cache = false;
  }

  Result<EtcdExportSummary> Run() {
    ETCDW_ASSIGN_OR_RETURN(writer_, bbolt::BoltWriter::Create(path_));
    ETCDW_ASSIGN_OR_RETURN(const int64_t finished,
                           MetaRevision(storage::meta::kFinishedCompactRev));
    ETCDW_ASSIGN_OR_RETURN(const int64_t scheduled,
                           MetaRevision(storage::meta::kScheduledCompactRev));
    ETCDW_ASSIGN_OR_RETURN(const int64_t current, MetaRevision(storage::meta::kCurrentRev));
    summary_.revision = std::max<int64_t>(current, 0);
    summary_.compact_revision = finished;

    ETCDW_RETURN_IF_ERROR(WriteAlarms());
    ETCDW_RETURN_IF_ERROR(WriteAuth());
    ETCDW_RETURN_IF_ERROR(writer_->BeginBucket("cluster"));
    if (!options_.cluster_version.empty()) {
      ETCDW_RETURN_IF_ERROR(writer_->Put("clusterVersion", options_.cluster_version));
    }
    ETCDW_RETURN_IF_ERROR(writer_->BeginBucket("key"));
    if (finished >= 1) ETCDW_RETURN_IF_ERROR(WriteCompactedVersions(finished));
    ETCDW_RETURN_IF_ERROR(WriteChangesFrom(std::max<int64_t>(finished, 1)));
    ETCDW_RETURN_IF_ERROR(WriteLeases());
    ETCDW_RETURN_IF_ERROR(WriteMembers());
    ETCDW_RETURN_IF_ERROR(writer_->BeginBucket("meta"));
    ETCDW_ASSIGN_OR_RETURN(
        std::optional<std::string> ci,
        engine_.Get(Column::kMeta, storage::meta::kConsistentIndex.key, &snapshot_));
    ETCDW_RETURN_IF_ERROR(writer_->Put("consistent_index", ci.value_or(Be64(0))));
    if (finished >= 1) {
      ETCDW_RETURN_IF_ERROR(
          writer_->Put("finishedCompactRev", EtcdRevisionKey(finished, 0, false)));
    }
    if (std::max(scheduled, finished) >= 1) {
      ETCDW_RETURN_IF_ERROR(writer_->Put("scheduledCompactRev",
                                         EtcdRevisionKey(std::max(scheduled, finished), 0, false)));
    }
    ETCDW_ASSIGN_OR_RETURN(bbolt::WriterStats stats, writer_->Finish());
    summary_.db_bytes = stats.pages * bbolt::kWriterPageSize;
    return summary_;
  }

 private:
  // A be64 record of the meta column; -1 when absent.
  Result<int64_t> MetaRevision(const storage::meta::Record& r) {
    ETCDW_ASSIGN_OR_RETURN(std::optional<std::string> v,
                           engine_.Get(Column::kMeta, r.key, &snapshot_));
    if (!v) return int64_t{-1};
    if (v->size() != 8) {
      return DataLoss("export: meta record \"" + std::string(r.key) + "\" holds " +
                      std::to_string(v->size()) + " bytes, not a be64");
    }
    return static_cast<int64_t>(storage::DecodeFixed64BE(v->data()));
  }

  // etcd's auth buckets from our auth records (member/auth_store.h): `auth` holds authEnabled
  // (one byte, once authentication was ever enabled) and authRevision (be64; a new store's is
  // 1); authRoles and authUsers hold authpb.Role and authpb.User by name, as ours do.
  Status WriteAuth() {
    namespace meta = storage::meta;
    ETCDW_RETURN_IF_ERROR(writer_->BeginBucket("auth"));
    ETCDW_ASSIGN_OR_RETURN(std::optional<std::string> enabled,
                           engine_.Get(Column::kMeta, meta::kAuthEnabled.key, &snapshot_));
    if (enabled) ETCDW_RETURN_IF_ERROR(writer_->Put("authEnabled", *enabled));
    ETCDW_ASSIGN_OR_RETURN(std::optional<std::string> revision,
                           engine_.Get(Column::kMeta, meta::kAuthRevision.key, &snapshot_));
    ETCDW_RETURN_IF_ERROR(writer_->Put("authRevision", revision.value_or(Be64(1))));
    for (const auto* family : {&meta::kAuthRoles, &meta::kAuthUsers}) {
      ETCDW_RETURN_IF_ERROR(
          writer_->BeginBucket(family == &meta::kAuthRoles ? "authRoles" : "authUsers"));
      storage::ReadOptions ro = ro_;
      ro.lower_bound = std::string(family->key);
      ro.upper_bound = meta::FamilyEnd(*family);
      auto it = engine_.NewIterator(Column::kMeta, ro);
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        ETCDW_RETURN_IF_ERROR(writer_->Put(it->key().substr(family->key.size()), it->value()));
      }
      ETCDW_RETURN_IF_ERROR(it->status());
    }
    return Status::Ok();
  }

  Status WriteAlarms() {
    ETCDW_RETURN_IF_ERROR(writer_->BeginBucket("alarm"));
    std::vector<std::string> keys;
    for (const auto& a : options_.alarms) {
      etcdserverpb::AlarmMember m;
      m.set_memberid(a.member_id);
      m.set_alarm(static_cast<etcdserverpb::AlarmType>(a.alarm));
      keys.push_back(m.SerializeAsString());
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    for (const auto& k : keys) ETCDW_RETURN_IF_ERROR(writer_->Put(k, ""));
    return Status::Ok();
  }

  Status WriteMembers() {
    std::vector<std::pair<std::string, std::string>> members;
    for (const auto& m : options_.members) members.emplace_back(Hex(m.id), MemberJson(m));
    std::sort(members.begin(), members.end());
    ETCDW_RETURN_IF_ERROR(writer_->BeginBucket("members"));
    for (const auto& [k, v] : members) ETCDW_RETURN_IF_ERROR(writer_->Put(k, v));
    std::vector<std::string> removed;
    for (uint64_t id : options_.removed_members) removed.push_back(Hex(id));
    std::sort(removed.begin(), removed.end());
    removed.erase(std::unique(removed.begin(), removed.end()), removed.end());
    ETCDW_RETURN_IF_ERROR(writer_->BeginBucket("members_removed"));
    for (const auto& k : removed) ETCDW_RETURN_IF_ERROR(writer_->Put(k, "removed"));
    return Status::Ok();
  }

  Status WriteLeases() {
    ETCDW_RETURN_IF_ERROR(writer_->BeginBucket("lease"));
    storage::ReadOptions ro = ro_;
    ro.lower_bound = "L";
    ro.upper_bound = "M";
    auto it = engine_.NewIterator(Column::kLeases, ro);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      internalpb::LeaseRecord rec;
      if (!rec.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
          rec.id() <= 0) {
        return DataLoss("export: the lease record at " + common::ToHex(it->key()) +
                        " does not parse");
      }
      ETCDW_RETURN_IF_ERROR(
          writer_->Put(Be64(static_cast<uint64_t>(rec.id())),
                       EtcdLeaseBytes({rec.id(), rec.ttl(), rec.remaining_ttl()})));
      ++summary_.leases;
    }
    return it->status();
  }

  // The version of `key` written at `main`: its KeyValue bytes, "" for a deletion.
  Result<std::string> Version(std::string_view key, int64_t main) {
    ETCDW_ASSIGN_OR_RETURN(
        std::optional<std::string> v,
        engine_.Get(Column::kKeys, storage::MakeVersionedKey(key, static_cast<uint64_t>(main)),
                    &snapshot_));
    if (!v) {
      return DataLoss("export: no version of key " + common::ToHex(key) + " at revision " +
                      std::to_string(main) + ", which the revision log names");
    }
    return std::move(*v);
  }

  Status PutChange(int64_t main, int64_t sub, std::string_view key, const std::string& kv) {
    ++summary_.changes;
    if (!kv.empty()) return writer_->Put(EtcdRevisionKey(main, sub, false), kv);
    mvccpb::KeyValue tomb;
    tomb.set_key(std::string(key));
    return writer_->Put(EtcdRevisionKey(main, sub, true), tomb.SerializeAsString());
  }

  // The changes at and after `from`, in revision order, from the Revisions column.
  Status WriteChangesFrom(int64_t from) {
    storage::ReadOptions ro = ro_;
    ro.lower_bound = RevisionLowerBound(from);
    auto it = engine_.NewIterator(Column::kRevisions, ro);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const Revision rev = DecodeRevisionKey(it->key());
      const std::string_view change = it->value();
      if (change.empty() || (change[0] != static_cast<char>(ChangeKind::kPut) &&
                             change[0] != static_cast<char>(ChangeKind::kDelete))) {
        return DataLoss("export: the revision record " + std::to_string(rev.main) + "." +
                        std::to_string(rev.sub) + " is not a put or a deletion");
      }
      const std::string_view key = change.substr(1);
      ETCDW_ASSIGN_OR_RETURN(std::string kv, Version(key, rev.main));
      const bool put = change[0] == static_cast<char>(ChangeKind::kPut);
      if (put == kv.empty()) {
        return DataLoss("export: the revision record " + std::to_string(rev.main) + "." +
                        std::to_string(rev.sub) + " and the version of key " + common::ToHex(key) +
                        " disagree on whether it is a deletion");
      }
      ETCDW_RETURN_IF_ERROR(PutChange(rev.main, rev.sub, key, kv));
    }
    return it->status();
  }

  // The versions below the compaction `finished`, which have no revision records: collected
  // from the Keys column (ordered by key), sorted by revision in bounded runs, merged.
  Status WriteCompactedVersions(int64_t finished) {
    std::vector<std::string> records;
    size_t bytes = 0;
    auto it = engine_.NewIterator(Column::kKeys, ro_);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const uint64_t main = storage::VersionOf(it->key());
      if (main >= static_cast<uint64_t>(finished)) continue;
      std::string r = Be64(main);
      r.append(storage::UserKeyOf(it->key()));
      bytes += r.size() + kRecordOverhead;
      records.push_back(std::move(r));
      if (bytes >= options_.sort_memory) {
        ETCDW_RETURN_IF_ERROR(SpillRun(records));
        bytes = 0;
      }
    }
    ETCDW_RETURN_IF_ERROR(it->status());
    std::sort(records.begin(), records.end());
    if (runs_.empty()) {
      for (const auto& r : records) ETCDW_RETURN_IF_ERROR(PutCompacted(r));
      return Status::Ok();
    }
    if (!records.empty()) ETCDW_RETURN_IF_ERROR(SpillRun(records));
    return MergeRuns();
  }

  Status SpillRun(std::vector<std::string>& records) {
    std::sort(records.begin(), records.end());
    ETCDW_ASSIGN_OR_RETURN(
        std::unique_ptr<RunFile> run,
        RunFile::Write(path_ + ".sort-" + std::to_string(runs_.size()), records));
    runs_.push_back(std::move(run));
    ++summary_.sort_runs;
    records.clear();
    records.shrink_to_fit();
    return Status::Ok();
  }

  Status MergeRuns() {
    using Head = std::pair<std::string, size_t>;  // record, run
    std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
    std::string r;
    for (size_t i = 0; i < runs_.size(); ++i) {
      ETCDW_ASSIGN_OR_RETURN(bool more, runs_[i]->Next(r));
      if (more) heads.emplace(std::move(r), i);
    }
    while (!heads.empty()) {
      Head h = heads.top();
      heads.pop();
      ETCDW_RETURN_IF_ERROR(PutCompacted(h.first));
      ETCDW_ASSIGN_OR_RETURN(bool more, runs_[h.second]->Next(r));
      if (more) heads.emplace(std::move(r), h.second);
    }
    runs_.clear();
    return Status::Ok();
  }

  // One sorted record (be64 main + key): sub-revisions count from 0 within each main revision.
  Status PutCompacted(std::string_view record) {
    const auto main = static_cast<int64_t>(storage::DecodeFixed64BE(record.data()));
    const std::string_view key = record.substr(8);
    next_sub_ = main == last_main_ ? next_sub_ + 1 : 0;
    last_main_ = main;
    ETCDW_ASSIGN_OR_RETURN(std::string kv, Version(key, main));
    ++summary_.compacted_changes;
    return PutChange(main, next_sub_, key, kv);
  }

  const storage::Engine& engine_;
  const storage::Snapshot& snapshot_;
  const std::string path_;
  const EtcdExportOptions& options_;
  storage::ReadOptions ro_;
  std::unique_ptr<bbolt::BoltWriter> writer_;
  std::vector<std::unique_ptr<RunFile>> runs_;  // removed with the exporter
  int64_t last_main_ = -1;
  int64_t next_sub_ = 0;
  EtcdExportSummary summary_;
};

}  // namespace

Result<EtcdExportSummary> ExportEtcdBackend(const storage::Engine& engine,
                                            const storage::Snapshot& snapshot,
                                            const std::string& path,
                                            const EtcdExportOptions& options) {
  // The writer removes `path` unless it finished; the runs go with the exporter.
  Exporter exporter(engine, snapshot, path, options);
  return exporter.Run();
}

Status AppendSha256Trailer(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Errno("snapshot file \"" + path + "\"");
  common::Sha256 sha;
  std::string buf(size_t{1} << 20, '\0');
  Status st = Status::Ok();
  while (true) {
    const ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = Errno("reading snapshot file \"" + path + "\"");
      break;
    }
    if (n == 0) break;
    sha.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  if (st.ok()) {
    const auto digest = sha.Final();
    // The file offset is at its end: the digest follows the database.
    if (write(fd, digest.data(), digest.size()) != static_cast<ssize_t>(digest.size())) {
      st = Errno("writing the SHA-256 of snapshot file \"" + path + "\"");
    }
  }
  close(fd);
  return st;
}

Result<std::unique_ptr<SnapshotFileStream>> SnapshotFileStream::OpenAndUnlink(
    const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("snapshot file \"" + path + "\"");
  struct stat st {};
  if (fstat(fd, &st) != 0 || unlink(path.c_str()) != 0) {
    Status err = Errno("snapshot file \"" + path + "\"");
    close(fd);
    return err;
  }
  return std::unique_ptr<SnapshotFileStream>(
      new SnapshotFileStream(fd, static_cast<uint64_t>(st.st_size), path));
}

uint64_t SnapshotFileStream::size() const { return file_size_ + kSha256Bytes; }

SnapshotFileStream::~SnapshotFileStream() { close(fd_); }

Result<bool> SnapshotFileStream::Next(std::string& out, size_t max_bytes) {
  if (read_ >= file_size_) {
    if (trailer_done_) return false;
    const auto digest = sha_.Final();
    out.append(reinterpret_cast<const char*>(digest.data()), digest.size());
    trailer_done_ = true;
    return true;
  }
  const size_t want =
      static_cast<size_t>(std::min<uint64_t>(std::max<size_t>(max_bytes, 1), file_size_ - read_));
  const size_t at = out.size();
  out.resize(at + want);
  size_t done = 0;
  while (done < want) {
    const ssize_t n =
        pread(fd_, out.data() + at + done, want - done, static_cast<off_t>(read_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      out.resize(at);
      return n < 0 ? Errno("reading snapshot file \"" + path_ + "\"")
                   : DataLoss("snapshot file \"" + path_ + "\" shrank while streaming");
    }
    done += static_cast<size_t>(n);
  }
  sha_.Update(std::string_view(out.data() + at, want));
  read_ += want;
  return true;
}

}  // namespace etcdw::mvcc

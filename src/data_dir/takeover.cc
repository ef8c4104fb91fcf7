// TakeOverEtcdDataDir (data_dir.h): an etcd 3.4 data directory converted in place.
//
// The steps, each durable before the next, and what a crash after each leaves for the next
// start (which calls this again before opening the member):
//   1. read and check all of etcd's files (etcd_data_dir.h) under etcd's own lock; nothing
//      written yet.
//   2. build our member/ in <dir>/.etcdw-takeover: the backend imported into a new store
//      (etcd_backend.h) with the applied index = the backend's consistent index, etcd's member
//      and cluster IDs and members; the WAL's entries after that index translated into our Raft
//      log (etcd_entries.h) after (consistent index, its term), with etcd's hard state ("store-
//      built", "log-written"). Then everything synced ("synced").
//      Crash before the exchange: <dir>/member is still etcd's, and the next start removes the
//      partial build and starts again from step 1.
//   3. exchange <dir>/member with <dir>/.etcdw-takeover/member in one rename ("exchanged").
//      Crash now: <dir>/member is ours and complete; .etcdw-takeover/member is etcd's, which the
//      next start recognises (never removes) and moves on.
//   4. rename <dir>/.etcdw-takeover to <dir>/etcd-taken-over[-N] ("moved-aside"), synced.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "etcd_backend.h"
#include "etcd_data_dir.h"
#include "etcd_entries.h"
#include "etcdw/common/dir_sync.h"
#include "etcdw/common/logging.h"
#include "etcdw/data_dir/data_dir.h"
#include "etcdw/mvcc/kv_store.h"
#include "etcdw/storage/meta_records.h"
#include "etcdw/storage/raft_log.h"
#include "internal.h"

namespace etcdw::data_dir {

namespace internal {

Result<std::unique_ptr<EtcdLock>> EtcdLock::Acquire(const std::string& db_path) {
  const int fd = ::open(db_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(errno == ENOENT ? Code::kNotFound : Code::kUnavailable,
                  "\"" + db_path + "\": " + std::strerror(errno));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return FailedPrecondition("\"" + db_path +
                                "\" is locked by another process: is etcd still running on it?");
    }
    return Unavailable("lock \"" + db_path + "\": " + std::strerror(err));
  }
  return std::unique_ptr<EtcdLock>(new EtcdLock(fd));
}

EtcdLock::~EtcdLock() { ::close(fd_); }

Result<EtcdDataDir> ReadEtcdDataDir(const std::string& member_dir) {
  EtcdDataDir d;
  const std::string db_path = member_dir + "/snap/db";
  ETCDW_ASSIGN_OR_RETURN(d.lock, EtcdLock::Acquire(db_path));
  ETCDW_ASSIGN_OR_RETURN(d.db, bbolt::BoltDb::Open(db_path));
  const bbolt::BoltDb& db = *d.db;
  auto where = [&](const std::string& what) { return "etcd backend \"" + db_path + "\": " + what; };

  ETCDW_ASSIGN_OR_RETURN(auto ci, db.Get({"meta"}, "consistent_index"));
  if (ci) {
    if (ci->size() != 8) return DataLoss(where("meta consistent_index is not 8 bytes"));
    d.consistent_index = storage::DecodeFixed64BE(ci->data());
  }
  ETCDW_ASSIGN_OR_RETURN(bool has_auth, db.HasBucket({"auth"}));
  if (has_auth) {
    ETCDW_ASSIGN_OR_RETURN(auto enabled, db.Get({"auth"}, "authEnabled"));
    d.auth_enabled = enabled && !enabled->empty() && (*enabled)[0] != 0;
  }
  ETCDW_ASSIGN_OR_RETURN(bool has_members, db.HasBucket({"members"}));
  if (has_members) {
    ETCDW_RETURN_IF_ERROR(
        db.ForEach({"members"}, [&](std::string_view k, std::string_view v, bool bucket) -> Status {
          if (bucket) return DataLoss(where("members holds a bucket"));
          auto m = ParseEtcdMemberJson(v);
          if (!m.ok()) return m.status().WithContext(where("members " + std::string(k)));
          d.members.push_back(std::move(*m));
          return Status::Ok();
        }));
  }
  ETCDW_ASSIGN_OR_RETURN(bool has_removed, db.HasBucket({"members_removed"}));
  if (has_removed) {
    ETCDW_RETURN_IF_ERROR(
        db.ForEach({"members_removed"}, [&](std::string_view k, std::string_view, bool) -> Status {
          uint64_t id = 0;
          if (k.empty() || k.size() > 16)
            return DataLoss(where("members_removed: a key not an ID"));
          for (char c : k) {
            const bool digit = c >= '0' && c <= '9', letter = c >= 'a' && c <= 'f';
            if (!digit && !letter) return DataLoss(where("members_removed: a key not an ID"));
            id = id << 4 | static_cast<uint64_t>(digit ? c - '0' : c - 'a' + 10);
          }
          d.removed.push_back(id);
          return Status::Ok();
        }));
  }

  ETCDW_ASSIGN_OR_RETURN(d.wal, ReadEtcdWal(member_dir + "/wal", d.consistent_index));
  ETCDW_ASSIGN_OR_RETURN(d.snap, ReadNewestEtcdSnap(member_dir + "/snap"));

  // The log must carry on from the backend: the entry at the consistent index (or the snapshot
  // there) gives the term our log restarts after, and every later entry must be present.
  const uint64_t ci_index = d.consistent_index;
  std::optional<uint64_t> term = d.wal.TermOf(ci_index);
  if (!term && d.snap && d.snap->position.index == ci_index) term = d.snap->position.term;
  if (!term) {
    return DataLoss("etcd's WAL in \"" + member_dir + "/wal\" does not hold the entry at the " +
                    "backend's consistent index " + std::to_string(ci_index) +
                    " nor a snapshot there");
  }
  d.consistent_term = *term;
  const auto& ents = d.wal.entries;
  if (!ents.empty() && ents.back().index < ci_index) {
    return DataLoss("etcd's backend applied index " + std::to_string(ci_index) +
                    ", beyond the WAL's last entry " + std::to_string(ents.back().index));
  }
  if (!ents.empty() && ents.front().index > ci_index + 1) {
    return DataLoss("etcd's WAL lacks the entries " + std::to_string(ci_index + 1) + " to " +
                    std::to_string(ents.front().index - 1) + " after the backend's index");
  }
  d.first_replayed = ents.empty() ? 0 : static_cast<size_t>(ci_index + 1 - ents.front().index);
  return d;
}

}  // namespace internal

namespace {

namespace fs = std::filesystem;
using internal::EtcdDataDir;

constexpr char kBuildName[] = ".etcdw-takeover";
constexpr char kAsideName[] = "etcd-taken-over";

bool IsFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool Exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

// etcd's member directory: its backend, and none of our store.
bool IsEtcdMember(const std::string& member) {
  return IsFile(member + "/snap/db") && !Exists(member + "/store");
}

// Our member directory as a finished takeover leaves it.
bool IsOurMember(const std::string& member) { return IsFile(member + "/store/CURRENT"); }

void Step(const TakeoverOptions& opts, const char* name) {
  if (opts.after_step) opts.after_step(name);
}

// Builds our member/ under `build` from what `etcd` holds. Returns the store's revision.
Result<int64_t> BuildMember(const EtcdDataDir& etcd, const std::string& build,
                            const TakeoverOptions& opts, internal::EtcdEntryStats& stats) {
  // Translated first: an entry we cannot take (a name that is not UTF-8) stops us before
  // anything is written.
  std::vector<raftpb::Entry> entries;
  entries.reserve(etcd.ReplayedEntries());
  for (size_t i = etcd.first_replayed; i < etcd.wal.entries.size(); ++i) {
    ETCDW_ASSIGN_OR_RETURN(raftpb::Entry e, internal::TranslateEtcdEntry(etcd.wal.entries[i], stats,
                                                                         opts.bcrypt_cost));
    entries.push_back(std::move(e));
  }
  const std::string member = build + "/member";
  if (::mkdir(build.c_str(), 0700) != 0 || ::mkdir(member.c_str(), 0700) != 0) {
    return Unavailable("cannot create \"" + member + "\": " + std::strerror(errno));
  }
  ETCDW_ASSIGN_OR_RETURN(auto engine, storage::Engine::Open(member + "/store", {}));
  ETCDW_ASSIGN_OR_RETURN(internal::EtcdBackendSummary s,
                         internal::ImportEtcdBackend(*etcd.db, *engine));
  {
    storage::Batch batch(*engine);
    batch.Put(storage::Column::kMeta, storage::meta::kConsistentIndex.key,
              storage::EncodeFixed64BE(etcd.consistent_index));
    cluster::StageLocalMemberId(batch, etcd.wal.member_id);
    cluster::Membership members;
    members.StageClusterId(batch, etcd.wal.cluster_id);
    for (const cluster::Member& m : etcd.members) members.StageAdd(batch, m);
    for (uint64_t id : etcd.removed) members.StageRemove(batch, id);
    ETCDW_RETURN_IF_ERROR(engine->Write(batch, /*sync=*/true));
  }
  ETCDW_ASSIGN_OR_RETURN(auto kv, mvcc::KvStore::Open(*engine));
  Status consistent = internal::CheckMvccConsistency(*engine, *kv);
  if (!consistent.ok()) return consistent.WithContext("etcd's backend state is inconsistent");
  if (kv->ConsistentIndex() != etcd.consistent_index) {
    return Internal("the imported store reads applied index " +
                    std::to_string(kv->ConsistentIndex()) + ", not etcd's " +
                    std::to_string(etcd.consistent_index));
  }
  kv.reset();
  ETCDW_RETURN_IF_ERROR(engine->Flush());
  Step(opts, "store-built");

  storage::RaftLog log(member + "/wal");
  ETCDW_RETURN_IF_ERROR(log.Open(engine.get()));
  ETCDW_RETURN_IF_ERROR(log.Reset(etcd.consistent_index, etcd.consistent_term));
  const uint64_t last_index = entries.empty() ? etcd.consistent_index : entries.back().index();
  const uint64_t last_term = entries.empty() ? etcd.consistent_term : entries.back().term();
  const internal::EtcdHardState& ehs = etcd.wal.hard_state;
  raftpb::HardState hs;
  hs.set_term(std::max(ehs.term, last_term));
  if (hs.term() == ehs.term) hs.set_vote(ehs.vote);
  // The backend may have applied entries the saved hard state does not count as committed yet
  // (etcd applies in parallel with saving); never beyond the log.
  hs.set_commit(std::min(std::max(ehs.commit, etcd.consistent_index), last_index));
  ETCDW_RETURN_IF_ERROR(log.Append(entries, &hs, /*sync=*/true));
  Step(opts, "log-written");
  return s.revision;
}

// Moves `build` (now holding etcd's member/) to the first free etcd-taken-over name.
Result<std::string> MoveAside(const std::string& dir, const std::string& build,
                              const TakeoverOptions& opts) {
  for (int n = 1; n < 1000; ++n) {
    std::string to = dir + "/" + kAsideName + (n == 1 ? "" : "-" + std::to_string(n));
    Status st = internal::RenameNoReplace(build, to);
    if (st.code() == Code::kAlreadyExists) continue;
    ETCDW_RETURN_IF_ERROR(st);
    ETCDW_RETURN_IF_ERROR(common::SyncDirectory(dir));
    Step(opts, "moved-aside");
    log::Info("etcd's files moved aside, unchanged: etcd can start from there again",
              {log::F("data-dir", dir), log::F("moved-to", to)});
    return to;
  }
  return Unavailable("no free name for etcd's files in \"" + dir + "\"");
}

}  // namespace

bool IsEtcdDataDir(const std::string& dir) { return IsEtcdMember(dir + "/member"); }

Result<TakeoverResult> TakeOverEtcdDataDir(const std::string& dir_in, const TakeoverOptions& opts) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string member = dir + "/member";
  const std::string build = dir + "/" + kBuildName;
  TakeoverResult r;

  if (Exists(build)) {
    if (IsEtcdMember(build + "/member")) {
      // Exchanged before a crash: ours is in place, etcd's waits to be moved aside.
      if (!IsOurMember(member)) {
        return DataLoss("\"" + build + "/member\" holds etcd's files but \"" + member +
                        "\" is not a complete store of ours: an interrupted takeover this "
                        "version cannot finish; nothing was changed");
      }
      ETCDW_ASSIGN_OR_RETURN(r.moved_to, MoveAside(dir, build, opts));
      r.taken_over = true;
      log::Info("finished an interrupted takeover of an etcd data directory",
                {log::F("data-dir", dir)});
      return r;
    }
    if (!IsEtcdMember(member)) {
      return FailedPrecondition("\"" + build + "\" is left by an interrupted takeover, but \"" +
                                member + "\" is not etcd's: remove it by hand if unneeded");
    }
    // A build that did not finish: redone from the start.
    std::error_code ec;
    fs::remove_all(build, ec);
    if (ec) return Unavailable("cannot remove \"" + build + "\": " + ec.message());
    log::Warn("removed the partial store of an interrupted takeover; starting again",
              {log::F("path", build)});
  }
  if (!IsEtcdMember(member)) return r;

  auto fail = [&](const Status& st) {
    std::error_code ec;
    fs::remove_all(build, ec);
    return st.WithContext("taking over etcd's data directory \"" + dir + "\"");
  };
  auto etcd = internal::ReadEtcdDataDir(member);
  if (!etcd.ok()) return fail(etcd.status());
  internal::EtcdEntryStats stats;
  auto rev = BuildMember(*etcd, build, opts, stats);
  if (!rev.ok()) return fail(rev.status());
  Status synced = common::SyncDirectory(build + "/member");
  if (synced.ok()) synced = common::SyncDirectory(build);
  if (synced.ok()) synced = common::SyncDirectory(dir);
  if (!synced.ok()) return fail(synced);
  Step(opts, "synced");

  // The one step that changes what <dir>/member is.
  Status exchanged = internal::ExchangePaths(build + "/member", member);
  if (!exchanged.ok()) return fail(exchanged);
  ETCDW_RETURN_IF_ERROR(common::SyncDirectory(dir));
  ETCDW_RETURN_IF_ERROR(common::SyncDirectory(build));
  Step(opts, "exchanged");
  etcd->lock.reset();

  r.taken_over = true;
  r.revision = *rev;
  r.consistent_index = etcd->consistent_index;
  r.replayed_entries = etcd->ReplayedEntries();
  r.member_id = etcd->wal.member_id;
  r.cluster_id = etcd->wal.cluster_id;
  log::Info("took over etcd's data directory",
            {log::F("data-dir", dir), log::Hex("member-id", r.member_id),
             log::Hex("cluster-id", r.cluster_id), log::F("members", etcd->members.size()),
             log::F("revision", r.revision), log::F("consistent-index", r.consistent_index),
             log::F("replayed-entries", r.replayed_entries), log::F("requests", stats.requests),
             log::F("auth-requests", stats.auth_requests),
             log::F("auth-enabled", etcd->auth_enabled), log::F("conf-changes", stats.conf_changes),
             log::F("member-attributes", stats.member_attributes),
             log::F("skipped-v2-requests", stats.skipped_v2),
             log::F("skipped-other", stats.skipped_other),
             log::F("torn-wal-tail-offset", etcd->wal.torn_tail_offset)});
  ETCDW_ASSIGN_OR_RETURN(r.moved_to, MoveAside(dir, build, opts));
  return r;
}

}  // namespace etcdw::data_dir

#include "etcd_backend.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "etcd/authpb/auth.pb.h"
#include "etcdw/common/hash.h"
#include "etcdw/common/varint.h"
#include "etcdw/mvcc/import.h"
#include "etcdw/mvcc/snapshot.h"
#include "etcdw/storage/meta_records.h"

namespace etcdw::data_dir::internal {

namespace {

constexpr size_t kRevisionBytes = 17;  // be64 main, '_', be64 sub
constexpr char kTombstoneMark = 't';
constexpr int64_t kHashBytes = 32;  // SHA-256
constexpr int64_t kSnapshotAlignment = 512;

// "bucket "b", key 0a0b...": where an error was found.
std::string Where(std::string_view bucket, std::string_view key) {
  return "etcd backend: bucket \"" + std::string(bucket) + "\", key " + common::ToHex(key);
}

// Reads the protobuf fields of etcd's leasepb.Lease, our proto/ having no copy of it:
//   message Lease { int64 ID = 1; int64 TTL = 2; int64 RemainingTTL = 3; }
// All three are varints (int64: negative values are 10-byte two's complement). Fields of other
// numbers are skipped by their wire type, as protobuf's parser skips unknown fields; a field cut
// short, or of a wire type protobuf 3 never writes (groups), is an error.
class EtcdLeaseReader {
 public:
  explicit EtcdLeaseReader(std::string_view in) : in_(in) {}

  Result<mvcc::LeaseInfo> Read() {
    mvcc::LeaseInfo lease;
    while (!in_.empty()) {
      uint64_t tag = 0;
      if (!common::ConsumeVarint(in_, &tag)) return Bad("a field tag is cut short");
      const uint64_t field = tag >> 3;
      const uint64_t wire_type = tag & 7;
      if (wire_type == kVarint) {
        uint64_t v = 0;
        if (!common::ConsumeVarint(in_, &v)) return Bad("a varint is cut short");
        if (field == 1) lease.id = static_cast<int64_t>(v);
        if (field == 2) lease.ttl = static_cast<int64_t>(v);
        if (field == 3) lease.remaining_ttl = static_cast<int64_t>(v);
      } else if (field >= 1 && field <= 3) {
        return Bad("field " + std::to_string(field) + " is not a varint");
      } else if (!Skip(wire_type)) {
        return Bad("field " + std::to_string(field) + " of wire type " + std::to_string(wire_type) +
                   " cannot be skipped");
      }
    }
    return lease;
  }

 private:
  static constexpr uint64_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

  bool Skip(uint64_t wire_type) {
    uint64_t n = 0;
    if (wire_type == kFixed64) {
      n = 8;
    } else if (wire_type == kFixed32) {
      n = 4;
    } else if (wire_type == kLengthDelimited) {
      if (!common::ConsumeVarint(in_, &n)) return false;
    } else {
      return false;
    }
    if (n > in_.size()) return false;
    in_.remove_prefix(static_cast<size_t>(n));
    return true;
  }
  static Status Bad(const std::string& what) { return DataLoss("not a leasepb.Lease: " + what); }

  std::string_view in_;
};

// A meta record holding a revision (scheduledCompactRev, finishedCompactRev): its main
// revision, -1 when absent.
Result<int64_t> MetaRevision(const bbolt::BoltDb& db, std::string_view name) {
  ETCDW_ASSIGN_OR_RETURN(std::optional<std::string> v, db.Get({"meta"}, name));
  if (!v) return int64_t{-1};
  if (v->size() != kRevisionBytes || (*v)[8] != '_') {
    return DataLoss(Where("meta", name) + ": a revision of " + std::to_string(v->size()) +
                    " bytes, not " + std::to_string(kRevisionBytes));
  }
  return static_cast<int64_t>(storage::DecodeFixed64BE(v->data()));
}

// A meta record holding a be64 (consistent_index, term); 0 when absent.
Result<uint64_t> MetaU64(const bbolt::BoltDb& db, std::string_view name) {
  ETCDW_ASSIGN_OR_RETURN(std::optional<std::string> v, db.Get({"meta"}, name));
  if (!v) return uint64_t{0};
  if (v->size() != 8) {
    return DataLoss(Where("meta", name) + ": " + std::to_string(v->size()) + " bytes, not a be64");
  }
  return storage::DecodeFixed64BE(v->data());
}

Status ReadMeta(const bbolt::BoltDb& db, EtcdBackendSummary& s) {
  ETCDW_ASSIGN_OR_RETURN(bool has_meta, db.HasBucket({"meta"}));
  if (!has_meta) return DataLoss("etcd backend: no bucket \"meta\"");
  ETCDW_ASSIGN_OR_RETURN(s.consistent_index, MetaU64(db, "consistent_index"));
  ETCDW_ASSIGN_OR_RETURN(s.term, MetaU64(db, "term"));
  ETCDW_ASSIGN_OR_RETURN(s.scheduled_compact_rev, MetaRevision(db, "scheduledCompactRev"));
  ETCDW_ASSIGN_OR_RETURN(s.finished_compact_rev, MetaRevision(db, "finishedCompactRev"));
  return Status::Ok();
}

// Counts the entries of the bucket at `name`, if it exists.
Result<uint64_t> CountEntries(const bbolt::BoltDb& db, const std::string& name) {
  ETCDW_ASSIGN_OR_RETURN(bool exists, db.HasBucket({name}));
  uint64_t n = 0;
  if (exists) {
    ETCDW_RETURN_IF_ERROR(db.ForEach({name}, [&](std::string_view, std::string_view, bool) {
      ++n;
      return Status::Ok();
    }));
  }
  return n;
}

// The old cluster's records: counted for the log, never imported.
Status ReadCluster(const bbolt::BoltDb& db, EtcdBackendSummary& s) {
  ETCDW_ASSIGN_OR_RETURN(s.members, CountEntries(db, "members"));
  ETCDW_ASSIGN_OR_RETURN(bool has_cluster, db.HasBucket({"cluster"}));
  if (has_cluster) {
    ETCDW_ASSIGN_OR_RETURN(std::optional<std::string> v, db.Get({"cluster"}, "clusterVersion"));
    s.cluster_version = v.value_or("");
  }
  return Status::Ok();
}

// etcd's auth state, copied into our auth records (member/auth_store.h keeps the same
// messages): `auth` authEnabled -> one byte, 1 when enabled, and authRevision -> be64;
// authUsers and authRoles -> authpb.User and authpb.Role by name. Their bcrypt password hashes
// are Go's, which ours compare as they are.
Status ImportAuth(const bbolt::BoltDb& db, storage::Engine& engine, EtcdBackendSummary& s) {
  namespace meta = storage::meta;
  ETCDW_ASSIGN_OR_RETURN(bool has_auth, db.HasBucket({"auth"}));
  if (!has_auth) return Status::Ok();
  storage::Batch batch(engine);
  ETCDW_ASSIGN_OR_RETURN(std::optional<std::string> enabled, db.Get({"auth"}, "authEnabled"));
  if (enabled) {
    if (enabled->size() != 1) return DataLoss("auth bucket: authEnabled is not one byte");
    s.auth_enabled = (*enabled)[0] == 1;
    batch.Put(storage::Column::kMeta, meta::kAuthEnabled.key,
              std::string(1, s.auth_enabled ? '\1' : '\0'));
  }
  ETCDW_ASSIGN_OR_RETURN(std::optional<std::string> revision, db.Get({"auth"}, "authRevision"));
  if (revision) {
    if (revision->size() != 8) return DataLoss("auth bucket: authRevision is not 8 bytes");
    batch.Put(storage::Column::kMeta, meta::kAuthRevision.key, *revision);
  }
  auto copy = [&](const std::string& bucket, const meta::Record& family, auto message,
                  uint64_t& count) -> Status {
    ETCDW_ASSIGN_OR_RETURN(bool has, db.HasBucket({bucket}));
    if (!has) return Status::Ok();
    return db.ForEach(
        {bucket}, [&](std::string_view key, std::string_view value, bool is_bucket) -> Status {
          if (is_bucket || !message.ParseFromArray(value.data(), static_cast<int>(value.size())) ||
              message.name() != key || key.empty()) {
            return DataLoss("etcd backend: bucket \"" + bucket + "\", key " + common::ToHex(key) +
                            ": not a " + message.GetTypeName() + " of that name");
          }
          batch.Put(storage::Column::kMeta, meta::KeyIn(family, key), value);
          ++count;
          return Status::Ok();
        });
  };
  ETCDW_RETURN_IF_ERROR(copy("authUsers", meta::kAuthUsers, authpb::User(), s.auth_users));
  ETCDW_RETURN_IF_ERROR(copy("authRoles", meta::kAuthRoles, authpb::Role(), s.auth_roles));
  return engine.Write(batch, /*sync=*/true);
}

Status ImportLeases(const bbolt::BoltDb& db, mvcc::StateImporter& importer) {
  ETCDW_ASSIGN_OR_RETURN(bool has_leases, db.HasBucket({"lease"}));
  if (!has_leases) return Status::Ok();  // a backend no lessor ever wrote to
  return db.ForEach({"lease"}, [&](std::string_view key, std::string_view value, bool bucket) {
    if (bucket) return DataLoss(Where("lease", key) + ": a bucket, not a lease");
    if (key.size() != 8) {
      return DataLoss(Where("lease", key) + ": " + std::to_string(key.size()) +
                      " bytes, not a be64 lease ID");
    }
    auto lease = ParseEtcdLease(value);
    if (!lease.ok()) return lease.status().WithContext(Where("lease", key));
    if (static_cast<uint64_t>(lease->id) != storage::DecodeFixed64BE(key.data())) {
      return DataLoss(Where("lease", key) + ": holds lease " + std::to_string(lease->id));
    }
    Status added = importer.AddLease(*lease);
    return added.ok() ? added : DataLoss(Where("lease", key) + ": " + added.message());
  });
}

Status ImportKeys(const bbolt::BoltDb& db, mvcc::StateImporter& importer) {
  ETCDW_ASSIGN_OR_RETURN(bool has_keys, db.HasBucket({"key"}));
  if (!has_keys) return DataLoss("etcd backend: no bucket \"key\"");
  return db.ForEach({"key"}, [&](std::string_view key, std::string_view value, bool bucket) {
    if (bucket) return DataLoss(Where("key", key) + ": a bucket, not a change");
    auto rev = ParseEtcdRevisionKey(key);
    if (!rev.ok()) return rev.status().WithContext(Where("key", key));
    Status added = importer.AddVersion(rev->rev, rev->tombstone, value);
    return added.ok() ? added : added.WithContext(Where("key", key));
  });
}

}  // namespace

Result<bool> IsBoltFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("snapshot file \"" + path + "\" cannot be read");
  std::string head(64, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head.size() >= 32 && bbolt::LooksLikeBolt(head);
}

Result<int64_t> EtcdSnapshotDbLength(const std::string& path, bool skip_hash_check) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return Status(errno == ENOENT ? Code::kNotFound : Code::kUnavailable,
                  "snapshot file \"" + path + "\": " + std::strerror(errno));
  }
  const int64_t size = st.st_size;
  if (size % kSnapshotAlignment == kHashBytes) {
    if (!skip_hash_check) ETCDW_RETURN_IF_ERROR(mvcc::VerifySnapshotFile(path));
    return size - kHashBytes;
  }
  if (!skip_hash_check) {
    return DataLoss("snapshot file \"" + path + "\" (" + std::to_string(size) +
                    " bytes): snapshot missing hash but --skip-hash-check=false");
  }
  return size;
}

Result<EtcdRevisionKey> ParseEtcdRevisionKey(std::string_view key) {
  const bool tombstone = key.size() == kRevisionBytes + 1 && key.back() == kTombstoneMark;
  if ((key.size() != kRevisionBytes && !tombstone) || key[8] != '_') {
    return DataLoss("not a revision (" + std::to_string(key.size()) +
                    " bytes: 17, or 18 ending in 't', with '_' after the main revision)");
  }
  const uint64_t main = storage::DecodeFixed64BE(key.data());
  const uint64_t sub = storage::DecodeFixed64BE(key.data() + 9);
  if (main < 1 || main > INT64_MAX || sub > INT64_MAX) {
    return DataLoss("revision " + std::to_string(main) + "." + std::to_string(sub) +
                    " is out of range");
  }
  return EtcdRevisionKey{{static_cast<int64_t>(main), static_cast<int64_t>(sub)}, tombstone};
}

Result<mvcc::LeaseInfo> ParseEtcdLease(std::string_view value) {
  return EtcdLeaseReader(value).Read();
}

Result<EtcdBackendSummary> ImportEtcdBackend(const bbolt::BoltDb& db, storage::Engine& engine) {
  EtcdBackendSummary s;
  ETCDW_RETURN_IF_ERROR(ReadMeta(db, s));
  ETCDW_RETURN_IF_ERROR(ReadCluster(db, s));
  mvcc::StateImporter importer(engine, {s.scheduled_compact_rev, s.finished_compact_rev});
  ETCDW_RETURN_IF_ERROR(ImportAuth(db, engine, s));
  ETCDW_RETURN_IF_ERROR(ImportLeases(db, importer));
  ETCDW_RETURN_IF_ERROR(ImportKeys(db, importer));
  ETCDW_ASSIGN_OR_RETURN(s.revision, importer.Finish());
  s.puts = importer.stats().puts;
  s.deletions = importer.stats().deletions;
  s.leases = importer.stats().leases;
  return s;
}

}  // namespace etcdw::data_dir::internal

// The logical consistency check of the MVCC columns (CheckMvccConsistency in
// internal.h), used by the full data-directory check and after a restore.
//
// What compaction leaves is part of the contract checked here (mvcc/compactor.cc): compacting
// to C deletes, for every key in the revision log up to C, all versions older than its newest
// version at or below C, and that one too if it is a deletion; it deletes the revision records
// below C and the deletion records at C. So, with F the finished and S the scheduled
// compaction revision:
//   * versions at or below F: per key at most one, a put, without revision record (unless at F);
//   * revision records below F: none;
//   * from the boundary `lo` on (S when S == F, S + 1 while a compaction to S is unfinished),
//     versions and revision records correspond one to one. Between F and S an interrupted
//     compaction may have deleted either side of a pair, so nothing is required there.
//
// The one-to-one correspondence is checked in one pass over each column by comparing counts
// and a sum of 64-bit hashes of (kind, revision, key) on both sides: equal multisets always
// pass, and a difference passes only by a 2^-64 accident. Only when they differ does a second,
// slower pass look for the record at fault, for the message.
#include <cctype>
#include <string>
#include <string_view>

#include "etcd/mvccpb/kv.pb.h"
#include "etcdw/cluster/membership.h"
#include "etcdw/internal.pb.h"
#include "etcdw/mvcc/revision.h"
#include "etcdw/storage/versioned_key.h"
#include "internal.h"

namespace etcdw::data_dir::internal {

namespace {

using storage::Column;

// A key for messages: printable bytes as they are, others escaped, long keys shortened.
std::string Quote(std::string_view key) {
  constexpr size_t kMax = 100;
  std::string out = "\"";
  for (size_t i = 0; i < key.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(key[i]);
    if (std::isprint(c) && c != '"' && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (key.size() > kMax) out += "...";
  return out + "\"";
}

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A 64-bit hash of one change: its kind, main revision and user key.
uint64_t ChangeHash(bool put, uint64_t rev, std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a over the key
  for (char c : key) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return Mix(h ^ Mix(rev * 2 + (put ? 1 : 0)));
}

struct Bounds {
  uint64_t rev;      // current revision
  int64_t finished;  // finished compaction revision, -1 if none
  uint64_t lo;       // versions and records from here on correspond one to one
};

Bounds BoundsOf(const mvcc::KvStore& kv) {
  Bounds b;
  b.rev = static_cast<uint64_t>(kv.Rev());
  b.finished = kv.FinishedCompactRev();
  const int64_t scheduled = kv.ScheduledCompactRev();
  if (scheduled < 1) {
    b.lo = 1;
  } else {
    b.lo = static_cast<uint64_t>(scheduled == b.finished ? scheduled : scheduled + 1);
  }
  return b;
}

bool BelowFinished(const Bounds& b, uint64_t rev) {
  return b.finished >= 1 && rev <= static_cast<uint64_t>(b.finished);
}

storage::ReadOptions Scan() {
  storage::ReadOptions ro;
  ro.fill_cache = false;
  return ro;
}

// The slow pass: finds a record without its counterpart from `lo` on.
Status LocateMismatch(const storage::Engine& engine, const Bounds& b, uint64_t versions,
                      uint64_t records) {
  auto rit = engine.NewIterator(Column::kRevisions, Scan());
  for (rit->Seek(mvcc::RevisionLowerBound(static_cast<int64_t>(b.lo))); rit->Valid(); rit->Next()) {
    if (rit->key().size() != 16 || rit->value().empty()) continue;  // reported by the fast pass
    const mvcc::Revision r = mvcc::DecodeRevisionKey(rit->key());
    const bool put = rit->value()[0] == static_cast<char>(mvcc::ChangeKind::kPut);
    const std::string_view key = rit->value().substr(1);
    ETCDW_ASSIGN_OR_RETURN(
        auto v,
        engine.Get(Column::kKeys, storage::MakeVersionedKey(key, static_cast<uint64_t>(r.main))));
    if (!v || v->empty() == put) {
      return DataLoss("revision log record " + std::to_string(r.main) + "." +
                      std::to_string(r.sub) + " (" + (put ? "put" : "delete") + " of key " +
                      Quote(key) + ") has no matching key version");
    }
  }
  ETCDW_RETURN_IF_ERROR(rit->status());

  auto kit = engine.NewIterator(Column::kKeys, Scan());
  for (kit->SeekToFirst(); kit->Valid(); kit->Next()) {
    const uint64_t v = storage::VersionOf(kit->key());
    if (v < b.lo) continue;
    const std::string_view key = storage::UserKeyOf(kit->key());
    const char kind = static_cast<char>(kit->value().empty() ? mvcc::ChangeKind::kDelete
                                                             : mvcc::ChangeKind::kPut);
    storage::ReadOptions ro = Scan();
    ro.upper_bound = mvcc::RevisionLowerBound(static_cast<int64_t>(v + 1));
    auto it = engine.NewIterator(Column::kRevisions, ro);
    bool found = false;
    for (it->Seek(mvcc::RevisionLowerBound(static_cast<int64_t>(v))); it->Valid() && !found;
         it->Next()) {
      found = it->value()[0] == kind && it->value().substr(1) == key;
    }
    ETCDW_RETURN_IF_ERROR(it->status());
    if (!found) {
      return DataLoss("key " + Quote(key) + ": the " +
                      (kind == static_cast<char>(mvcc::ChangeKind::kPut) ? "version" : "deletion") +
                      " at revision " + std::to_string(v) + " has no revision log record");
    }
  }
  ETCDW_RETURN_IF_ERROR(kit->status());
  return DataLoss("the key versions (" + std::to_string(versions) + ") and revision log records (" +
                  std::to_string(records) + ") from revision " + std::to_string(b.lo) +
                  " on do not correspond one to one (a record is duplicated)");
}

// Pass over the Keys column. Counts and hashes the versions from `lo` on; counts live keys
// carrying a lease, each checked to exist and to be attached.
Status CheckKeys(const storage::Engine& engine, const mvcc::KvStore& kv, const Bounds& b,
                 uint64_t* count, uint64_t* sum) {
  auto it = engine.NewIterator(Column::kKeys, Scan());
  std::string current;
  bool first = true;
  int below_finished = 0;  // versions of `current` at or below the finished compaction
  mvccpb::KeyValue parsed;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view vkey = it->key();
    if (vkey.size() < storage::kVersionSuffixBytes) {
      return DataLoss("key version record of " + std::to_string(vkey.size()) +
                      " bytes is too short");
    }
    const std::string_view key = storage::UserKeyOf(vkey);
    const uint64_t v = storage::VersionOf(vkey);
    // Versions come newest first: the first one of a key is its current state.
    const bool newest = first || key != current;
    if (newest) {
      current.assign(key);
      below_finished = 0;
      first = false;
    }
    if (v < 1 || v > b.rev) {
      return DataLoss("key " + Quote(key) + " has a version at revision " + std::to_string(v) +
                      ", outside [1, current revision " + std::to_string(b.rev) + "]");
    }
    const std::string_view value = it->value();
    const bool put = !value.empty();
    if (put) {
      if (!parsed.ParseFromArray(value.data(), static_cast<int>(value.size())) ||
          parsed.key() != key || parsed.mod_revision() != static_cast<int64_t>(v) ||
          parsed.create_revision() < 1 || parsed.create_revision() > static_cast<int64_t>(v) ||
          parsed.version() < 1) {
        return DataLoss("key " + Quote(key) + ": the version at revision " + std::to_string(v) +
                        " is corrupt");
      }
    }
    if (BelowFinished(b, v)) {
      if (!put) {
        return DataLoss("key " + Quote(key) + " has a deletion at revision " + std::to_string(v) +
                        ", at or below the finished compaction revision " +
                        std::to_string(b.finished));
      }
      if (++below_finished > 1) {
        return DataLoss("key " + Quote(key) + " has more than one version at or below the " +
                        "finished compaction revision " + std::to_string(b.finished));
      }
    }
    if (v >= b.lo) {
      ++*count;
      *sum += ChangeHash(put, v, key);
    }
    if (newest && put && parsed.lease() != 0) {
      const int64_t lease = parsed.lease();
      if (!kv.leases().Exists(lease)) {
        return DataLoss("key " + Quote(key) + " is attached to lease " +
                        cluster::IdToHex(static_cast<uint64_t>(lease)) + ", which does not exist");
      }
      std::string attachment = mvcc::LeaseTable::AttachmentPrefix(lease);
      attachment.append(key);
      ETCDW_ASSIGN_OR_RETURN(auto a, engine.Get(Column::kLeases, attachment));
      if (!a) {
        return DataLoss("key " + Quote(key) + " has lease " +
                        cluster::IdToHex(static_cast<uint64_t>(lease)) +
                        " but is missing from the lease's attached keys");
      }
    }
  }
  return it->status();
}

// Pass over the Revisions column: counts and hashes the records from `lo` on.
Status CheckRevisions(const storage::Engine& engine, const Bounds& b, uint64_t* count,
                      uint64_t* sum) {
  auto it = engine.NewIterator(Column::kRevisions, Scan());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view value = it->value();
    if (it->key().size() != 16 || value.empty() ||
        (value[0] != static_cast<char>(mvcc::ChangeKind::kPut) &&
         value[0] != static_cast<char>(mvcc::ChangeKind::kDelete))) {
      return DataLoss("revision log record is corrupt");
    }
    const mvcc::Revision r = mvcc::DecodeRevisionKey(it->key());
    if (r.main < 1 || static_cast<uint64_t>(r.main) > b.rev || r.sub < 0) {
      return DataLoss("revision log record " + std::to_string(r.main) + "." +
                      std::to_string(r.sub) + " lies outside [1, current revision " +
                      std::to_string(b.rev) + "]");
    }
    const uint64_t main = static_cast<uint64_t>(r.main);
    if (b.finished >= 1 && r.main < b.finished) {
      return DataLoss("revision log record " + std::to_string(r.main) +
                      " lies below the finished compaction revision " + std::to_string(b.finished));
    }
    if (main >= b.lo) {
      ++*count;
      *sum +=
          ChangeHash(value[0] == static_cast<char>(mvcc::ChangeKind::kPut), main, value.substr(1));
    }
  }
  return it->status();
}

// Pass over the Leases column: records are well-formed, every attachment belongs to an
// existing lease and names a live key whose current version carries that lease. With the
// check of live keys in CheckKeys, attachments and leased live keys are the same set.
Status CheckLeases(const storage::Engine& engine, const mvcc::KvStore& kv) {
  auto it = engine.NewIterator(Column::kLeases, Scan());
  auto keys = engine.NewIterator(Column::kKeys, Scan());
  internalpb::LeaseRecord rec;
  mvccpb::KeyValue current;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::string_view k = it->key();
    if (k.size() < 9 || (k[0] != 'L' && k[0] != 'A') || (k[0] == 'L' && k.size() != 9)) {
      return DataLoss("lease column holds a malformed record");
    }
    const int64_t id = static_cast<int64_t>(storage::DecodeFixed64BE(k.data() + 1));
    if (k[0] == 'L') {
      if (!rec.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
          rec.id() != id) {
        return DataLoss("lease " + cluster::IdToHex(static_cast<uint64_t>(id)) +
                        ": record is corrupt");
      }
      continue;
    }
    const std::string_view key = k.substr(9);
    if (!kv.leases().Exists(id)) {
      return DataLoss("key " + Quote(key) + " is attached to lease " +
                      cluster::IdToHex(static_cast<uint64_t>(id)) + ", which does not exist");
    }
    // The newest version of `key` (versions sort newest first).
    keys->Seek(storage::MakeVersionedKey(key, UINT64_MAX));
    const bool live =
        keys->Valid() && storage::UserKeyOf(keys->key()) == key && !keys->value().empty() &&
        current.ParseFromArray(keys->value().data(), static_cast<int>(keys->value().size()));
    if (!live || current.lease() != id) {
      ETCDW_RETURN_IF_ERROR(keys->status());
      return DataLoss("key " + Quote(key) + " is listed under lease " +
                      cluster::IdToHex(static_cast<uint64_t>(id)) + " but its current version " +
                      (live ? "does not carry it" : "does not exist"));
    }
  }
  ETCDW_RETURN_IF_ERROR(keys->status());
  return it->status();
}

}  // namespace

Status CheckMvccConsistency(const storage::Engine& engine, const mvcc::KvStore& kv) {
  const Bounds b = BoundsOf(kv);
  uint64_t versions = 0, version_sum = 0, records = 0, record_sum = 0;
  ETCDW_RETURN_IF_ERROR(CheckKeys(engine, kv, b, &versions, &version_sum));
  ETCDW_RETURN_IF_ERROR(CheckRevisions(engine, b, &records, &record_sum));
  if (versions != records || version_sum != record_sum) {
    return LocateMismatch(engine, b, versions, records);
  }
  return CheckLeases(engine, kv);
}

}  // namespace etcdw::data_dir::internal

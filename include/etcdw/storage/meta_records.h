// Every record of the store's meta column (Column::kMeta), declared once: its key (or, for a
// family of records, the prefix they share), which library writes it, and where it may travel.
// Readers that copy or drop records by kind (the snapshot writer and reader, the data-directory
// restore and its checks) decide from these declarations, never from string literals: a record
// that is not declared here is in no snapshot and survives no restore, and the full data-
// directory check reports it. Add a record here first, then write it.
//
// The storage layer knows nothing of what the records mean; the layers above own them. The
// table in docs/design.md ("Storage layout") lists the same records.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace etcdw::storage::meta {

enum class Kind {
  // State every member derives from the Raft log: equal on all members at the same applied
  // index. State snapshots (Maintenance.Snapshot, a leader's snapshot for a lagging member) carry
  // these records and only these.
  kReplicated,
  // This member's own: its identity, caches of replicated state, markers of unfinished work.
  // Never leaves the member.
  kLocal,
  // Written by an earlier version of the layout; read once to migrate, then deleted.
  kLegacy,
};

struct Record {
  std::string_view key;  // the record's key, or the prefix of the family's keys
  bool family;           // every key that starts with `key` (the rest of the key is the owner's)
  Kind kind;
  // Kept when a snapshot becomes a new data directory (data_dir::RestoreDataDir): a restore
  // makes a new cluster, so it keeps the store's data and drops the old cluster's membership,
  // alarms and Raft position with every local record.
  bool kept_by_restore;
  std::string_view owner;  // the library that writes it
  std::string_view value;  // what the value holds
};

// --- the store's position (mvcc/kv_store.h) ---
inline constexpr Record kCurrentRev{"mvcc/current_rev",
                                    false,
                                    Kind::kReplicated,
                                    true,
                                    "mvcc",
                                    "be64: the store's current revision"};
inline constexpr Record kConsistentIndex{
    "mvcc/consistent_index",
    false,
    Kind::kReplicated,
    false,
    "mvcc",
    "be64: the index of the last Raft entry applied (etcd's consistent index)"};
inline constexpr Record kScheduledCompactRev{"mvcc/scheduled_compact_rev",
                                             false,
                                             Kind::kReplicated,
                                             true,
                                             "mvcc",
                                             "be64: the revision of the last compaction applied"};
inline constexpr Record kFinishedCompactRev{
    "mvcc/finished_compact_rev",
    false,
    Kind::kReplicated,
    true,
    "mvcc",
    "be64: the revision up to which old versions are physically removed"};

// --- the cluster (cluster/membership.h) ---
inline constexpr Record kClusterId{"cluster/id", false,     Kind::kReplicated,
                                   false,        "cluster", "be64: the cluster ID"};
inline constexpr Record kClusterMembers{
    "cluster/member/", true,
    Kind::kReplicated, false,
    "cluster",         "<16 hex digits member ID> -> internalpb.MemberRecord"};
inline constexpr Record kRemovedMembers{"cluster/removed/", true,
                                        Kind::kReplicated,  false,
                                        "cluster",          "<16 hex digits member ID> -> empty"};
inline constexpr Record kAlarms{
    "alarm/", true,     Kind::kReplicated,
    false,    "member", "<be64 member ID><u8 AlarmType> -> empty (member/alarm_store.h)"};

// --- authentication (member/auth_store.h) ---
inline constexpr Record kAuthEnabled{"auth/enabled", false,    Kind::kReplicated,
                                     true,           "member", "u8: 1 when enabled"};
inline constexpr Record kAuthRevision{
    "auth/revision",   false,
    Kind::kReplicated, true,
    "member",          "be64: the auth store's revision (etcd's authRevision)"};
inline constexpr Record kAuthUsers{"auth/user/", true,     Kind::kReplicated,
                                   true,         "member", "<user name> -> authpb.User"};
inline constexpr Record kAuthRoles{"auth/role/", true,     Kind::kReplicated,
                                   true,         "member", "<role name> -> authpb.Role"};

// --- this member's own ---
inline constexpr Record kLocalMemberId{
    "local/member_id", false, Kind::kLocal, false, "cluster", "be64: this member's ID"};
inline constexpr Record kJoinMembers{
    "local/join_members",
    false,
    Kind::kLocal,
    false,
    "cluster",
    "etcdserverpb.MemberListResponse: the members a joining member learnt from the cluster"};
inline constexpr Record kRestoredIdentity{
    "local/restored_identity",
    false,
    Kind::kLocal,
    false,
    "cluster",
    "be64 member ID + be64 cluster ID a restored data directory was made for (until its first "
    "start)"};
inline constexpr Record kInstallingSnapshot{
    "local/installing_snapshot",
    false,
    Kind::kLocal,
    false,
    "member",
    "be64 index + be64 term of a Raft snapshot being installed (member/raft_node.h)"};
inline constexpr Record kKeyIndexHead{
    "local/key-index/head",
    false,
    Kind::kLocal,
    false,
    "mvcc",
    "the saved key index's head: format, revision, key and chunk counts (mvcc/key_index.h)"};
inline constexpr Record kKeyIndexChunks{"local/key-index/chunk/",
                                        true,
                                        Kind::kLocal,
                                        false,
                                        "mvcc",
                                        "<be64 n> -> the saved key index's chunk n"};

// --- earlier layouts (storage/raft_log.h moves them to the Raft log's files) ---
inline constexpr Record kLegacyHardState{"raft/hard_state", false, Kind::kLegacy, false, "storage",
                                         "raftpb.HardState"};
inline constexpr Record kLegacyCompacted{
    "raft/compacted", false,
    Kind::kLegacy,    false,
    "storage",        "be64 index + be64 term of the log's compaction point"};

// All of the above.
std::span<const Record* const> AllRecords();

// The declaration covering `key`; nullptr when none does.
const Record* Find(std::string_view key);

// A state snapshot carries the record: declared replicated.
bool InSnapshot(std::string_view key);
// A member keeps the record when it replaces its state with a snapshot's: declared local or
// legacy (everything else is state the snapshot replaces).
bool KeptOverSnapshot(std::string_view key);
// A restore into a new data directory keeps the record (Record::kept_by_restore).
bool KeptByRestore(std::string_view key);

// The key of one record of a family: its prefix, then `suffix`.
std::string KeyIn(const Record& family, std::string_view suffix);
// The first key after every key of the family (an exclusive iteration bound).
std::string FamilyEnd(const Record& family);

// `key` for messages: bytes outside printable ASCII written as \xNN (families end in binary IDs).
std::string Printable(std::string_view key);

}  // namespace etcdw::storage::meta

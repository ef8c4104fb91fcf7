// The authentication state, as etcd's auth store keeps it: whether authentication is enabled,
// its revision, the users (bcrypt password hashes, granted roles) and the roles (key
// permissions). Replicated through the log and persisted in the Meta column (storage/
// meta_records.h, "auth/..."), so every member holds the same state at the same applied index.
//
// The apply thread changes it with the Stage* methods, which stage the records into the apply
// batch and answer etcd's errors; any thread reads it. Permission checks follow etcd 3.4:
//   - everything is allowed while authentication is disabled;
//   - a request without a user (revision 0) is refused with UserEmpty;
//   - a request checked at an older auth revision than the store's is refused with
//     AuthOldRevision (the client authenticates again);
//   - a user with the root role may do anything; others need a role whose permissions cover the
//     whole key range asked for (READ for reads, WRITE for writes; READWRITE both).
#pragma once

#include <absl/base/thread_annotations.h>

#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/authpb/auth.pb.h"
#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/status.h"
#include "etcdw/storage/engine.h"

namespace etcdw::member {

// Who a request runs as: the user its token (or client certificate) names and the auth
// revision it was checked at. An empty user with revision 0 is a client that gave no token.
struct AuthInfo {
  std::string user;
  uint64_t revision = 0;
};

class AuthStore {
 public:
  static constexpr std::string_view kRootUser = "root";
  static constexpr std::string_view kRootRole = "root";

  // Reads the state from the engine (at open, and after a snapshot replaced the state).
  // Malformed records fail with DataLoss naming the record.
  Status Load(const storage::Engine& engine);

  bool Enabled() const;
  // etcd's authRevision: 1 on a new store, advanced by every change except enabling.
  uint64_t Revision() const;

  // --- permission checks (any thread): OK, or etcd's error ---
  // READ on [key, range_end) (range_end empty: the key alone; "\0": every key from `key`).
  Status CheckRange(const AuthInfo& who, std::string_view key, std::string_view range_end) const;
  // WRITE on the key.
  Status CheckPut(const AuthInfo& who, std::string_view key) const;
  // WRITE on [key, range_end).
  Status CheckDeleteRange(const AuthInfo& who, std::string_view key,
                          std::string_view range_end) const;
  // The root role (user and role management, maintenance and membership calls).
  Status CheckAdmin(const AuthInfo& who) const;
  // Range permission on every key a Txn compares, and the permission each of its operations
  // (in both branches) needs, as etcd checks a Txn.
  Status CheckTxn(const AuthInfo& who, const etcdserverpb::TxnRequest& txn) const;
  bool HasRole(std::string_view user, std::string_view role) const;

  // The password hash Authenticate compares against, and the revision it was read at.
  // AuthNotEnabled, AuthFailed (no such user) or NoPasswordUser.
  struct Credentials {
    std::string password_hash;
    uint64_t revision = 0;
  };
  Result<Credentials> CredentialsOf(std::string_view user) const;
  // Whether the user exists and may be given a token (AuthFailed otherwise, or with no-password
  // users, as etcd's Authenticate answers).
  Status CheckAuthenticate(std::string_view user) const;

  // --- apply thread: changes staged into `batch`, with etcd's errors ---
  // Enable: RootUserNotExist, RootRoleNotExist; enabling twice is allowed. Disable never fails.
  // Returns whether the state changed (tokens are dropped by the caller on disable).
  Status StageEnable(storage::Batch& batch);
  bool StageDisable(storage::Batch& batch);
  // `r.hashedpassword()` holds the hash (the proposer made it); the password field is ignored.
  Status StageUserAdd(storage::Batch& batch, const etcdserverpb::AuthUserAddRequest& r);
  Status StageUserDelete(storage::Batch& batch, const std::string& name);
  Status StageUserChangePassword(storage::Batch& batch, const std::string& name,
                                 const std::string& hashed_password);
  Status StageUserGrantRole(storage::Batch& batch, const std::string& user,
                            const std::string& role);
  Status StageUserRevokeRole(storage::Batch& batch, const std::string& user,
                             const std::string& role);
  Status StageRoleAdd(storage::Batch& batch, const std::string& name);
  Status StageRoleDelete(storage::Batch& batch, const std::string& name);
  Status StageRoleGrantPermission(storage::Batch& batch, const std::string& role,
                                  const authpb::Permission& perm);
  Status StageRoleRevokePermission(storage::Batch& batch, const std::string& role,
                                   const std::string& key, const std::string& range_end);

  // --- reads for the API (any thread) ---
  Result<std::vector<std::string>> UserRoles(std::string_view user) const;  // UserNotFound
  Result<std::vector<authpb::Permission>> RolePermissions(std::string_view role) const;
  std::vector<std::string> UserNames() const;  // sorted
  std::vector<std::string> RoleNames() const;  // sorted
  // Every user and role, for exports (sorted by name).
  std::vector<authpb::User> Users() const;
  std::vector<authpb::Role> Roles() const;

 private:
  // The ranges one user may read or write, merged over its roles: half-open intervals of keys,
  // an empty end meaning "to the end of the key space".
  struct Interval {
    std::string begin;
    std::string end;  // "" = unbounded
  };
  struct UserPerms {
    std::vector<Interval> read;
    std::vector<Interval> write;
  };
  enum class Access { kRead, kWrite };

  Status CheckOp(const AuthInfo& who, std::string_view key, std::string_view range_end,
                 Access access) const;
  static bool Covers(const std::vector<Interval>& perms, std::string_view key,
                     std::string_view range_end);
  // Rebuilds perms_ from users_ and roles_ (etcd's refreshRangePermCache).
  void RefreshPerms() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Advances the revision and stages it (etcd's commitRevision).
  void CommitRevision(storage::Batch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void StageUser(storage::Batch& batch, const authpb::User& u);
  static void StageRole(storage::Batch& batch, const authpb::Role& r);
  static bool HasRootRole(const authpb::User& u);

  mutable std::shared_mutex mu_;
  bool enabled_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, authpb::User, std::less<>> users_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, authpb::Role, std::less<>> roles_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, UserPerms, std::less<>> perms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace etcdw::member

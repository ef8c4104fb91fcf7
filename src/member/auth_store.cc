#include "etcdw/member/auth_store.h"

#include <algorithm>
#include <mutex>

#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"
#include "etcdw/storage/meta_records.h"

namespace etcdw::member {

namespace {

namespace meta = storage::meta;

// etcd's affine intervals: a range end of "\0" means "no end".
std::string_view OpenEnd(std::string_view range_end) {
  return range_end == std::string_view("\0", 1) ? std::string_view() : range_end;
}

// a < b where "" stands for +infinity (an unbounded end).
bool EndLess(std::string_view a, std::string_view b) {
  if (a.empty()) return false;
  if (b.empty()) return true;
  return a < b;
}

}  // namespace

Status AuthStore::Load(const storage::Engine& engine) {
  std::unique_lock lock(mu_);
  enabled_ = false;
  revision_ = 1;  // a new store's (etcd commits revision 1 when it creates the auth buckets)
  users_.clear();
  roles_.clear();
  ETCDW_ASSIGN_OR_RETURN(auto enabled, engine.Get(storage::Column::kMeta, meta::kAuthEnabled.key));
  if (enabled) enabled_ = *enabled == std::string(1, '\1');
  ETCDW_ASSIGN_OR_RETURN(auto rev, engine.Get(storage::Column::kMeta, meta::kAuthRevision.key));
  if (rev) {
    if (rev->size() != 8) return DataLoss("auth revision record is corrupt");
    revision_ = storage::DecodeFixed64BE(rev->data());
  }
  auto load = [&](const meta::Record& family, auto& into) -> Status {
    storage::ReadOptions ro;
    ro.lower_bound = std::string(family.key);
    ro.upper_bound = meta::FamilyEnd(family);
    auto it = engine.NewIterator(storage::Column::kMeta, ro);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      std::string name(it->key().substr(family.key.size()));
      auto& rec = into[name];
      if (!rec.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
          rec.name() != name) {
        return DataLoss("auth record \"" + meta::Printable(it->key()) + "\" is corrupt");
      }
    }
    return it->status();
  };
  ETCDW_RETURN_IF_ERROR(load(meta::kAuthUsers, users_));
  ETCDW_RETURN_IF_ERROR(load(meta::kAuthRoles, roles_));
  RefreshPerms();
  return Status::Ok();
}

bool AuthStore::Enabled() const {
  std::shared_lock lock(mu_);
  return enabled_;
}

uint64_t AuthStore::Revision() const {
  std::shared_lock lock(mu_);
  return revision_;
}

bool AuthStore::HasRootRole(const authpb::User& u) {
  return std::find(u.roles().begin(), u.roles().end(), kRootRole) != u.roles().end();
}

// etcd's interval tree "Contains": the permissions that overlap the asked range, taken in order
// of their start, must leave no gap and reach from its start to its end. A single key is the
// range [key, key + "\0").
bool AuthStore::Covers(const std::vector<Interval>& perms, std::string_view key,
                       std::string_view range_end) {
  std::string point_end;
  std::string_view end;
  if (range_end.empty()) {
    point_end = std::string(key) + '\0';
    end = point_end;
  } else {
    end = OpenEnd(range_end);
  }
  bool any = false;
  std::string_view min_begin;
  std::string_view max_end;
  for (const Interval& p : perms) {  // sorted by begin
    // Overlaps [key, end): p.begin < end and key < p.end.
    if (!(end.empty() || p.begin < end) || !EndLess(key, p.end)) continue;
    if (!any) {
      any = true;
      min_begin = p.begin;
      max_end = p.end;
      continue;
    }
    if (EndLess(max_end, p.begin)) return false;  // a gap
    if (EndLess(max_end, p.end)) max_end = p.end;
  }
  return any && !EndLess(max_end, end) && min_begin <= key;
}

void AuthStore::RefreshPerms() {
  perms_.clear();
  for (const auto& [name, user] : users_) {
    UserPerms& up = perms_[name];
    for (const std::string& role_name : user.roles()) {
      auto r = roles_.find(role_name);
      if (r == roles_.end()) continue;
      for (const authpb::Permission& p : r->second.keypermission()) {
        Interval ivl;
        ivl.begin = p.key();
        if (p.range_end().empty()) {
          ivl.end = p.key() + '\0';
        } else {
          ivl.end = std::string(OpenEnd(p.range_end()));
        }
        if (p.permtype() != authpb::Permission::WRITE) up.read.push_back(ivl);
        if (p.permtype() != authpb::Permission::READ) up.write.push_back(ivl);
      }
    }
    auto by_begin = [](const Interval& a, const Interval& b) { return a.begin < b.begin; };
    std::sort(up.read.begin(), up.read.end(), by_begin);
    std::sort(up.write.begin(), up.write.end(), by_begin);
  }
}

Status AuthStore::CheckOp(const AuthInfo& who, std::string_view key, std::string_view range_end,
                          Access access) const {
  std::shared_lock lock(mu_);
  if (!enabled_) return Status::Ok();
  if (who.revision == 0) return errors::UserEmpty();
  if (who.revision < revision_) return errors::AuthOldRevision();
  auto u = users_.find(who.user);
  if (u == users_.end()) return errors::PermissionDenied();
  if (HasRootRole(u->second)) return Status::Ok();
  auto p = perms_.find(who.user);
  if (p == perms_.end()) return errors::PermissionDenied();
  const auto& perms = access == Access::kRead ? p->second.read : p->second.write;
  return Covers(perms, key, range_end) ? Status::Ok() : errors::PermissionDenied();
}

Status AuthStore::CheckRange(const AuthInfo& who, std::string_view key,
                             std::string_view range_end) const {
  return CheckOp(who, key, range_end, Access::kRead);
}

Status AuthStore::CheckPut(const AuthInfo& who, std::string_view key) const {
  return CheckOp(who, key, {}, Access::kWrite);
}

Status AuthStore::CheckDeleteRange(const AuthInfo& who, std::string_view key,
                                   std::string_view range_end) const {
  return CheckOp(who, key, range_end, Access::kWrite);
}

Status AuthStore::CheckAdmin(const AuthInfo& who) const {
  std::shared_lock lock(mu_);
  if (!enabled_) return Status::Ok();
  if (who.user.empty()) return errors::UserEmpty();
  auto u = users_.find(who.user);
  if (u == users_.end()) return errors::UserNotFound();
  return HasRootRole(u->second) ? Status::Ok() : errors::PermissionDenied();
}

Status AuthStore::CheckTxn(const AuthInfo& who, const etcdserverpb::TxnRequest& txn) const {
  for (const auto& c : txn.compare()) {
    ETCDW_RETURN_IF_ERROR(CheckRange(who, c.key(), c.range_end()));
  }
  auto ops = [&](const auto& list) -> Status {
    for (const etcdserverpb::RequestOp& op : list) {
      switch (op.request_case()) {
        case etcdserverpb::RequestOp::kRequestRange:
          ETCDW_RETURN_IF_ERROR(
              CheckRange(who, op.request_range().key(), op.request_range().range_end()));
          break;
        case etcdserverpb::RequestOp::kRequestPut:
          ETCDW_RETURN_IF_ERROR(CheckPut(who, op.request_put().key()));
          break;
        case etcdserverpb::RequestOp::kRequestDeleteRange: {
          const auto& d = op.request_delete_range();
          if (d.prev_kv()) ETCDW_RETURN_IF_ERROR(CheckRange(who, d.key(), d.range_end()));
          ETCDW_RETURN_IF_ERROR(CheckDeleteRange(who, d.key(), d.range_end()));
          break;
        }
        case etcdserverpb::RequestOp::kRequestTxn:
          // etcd 3.4 checks the operations of the outer transaction only.
        case etcdserverpb::RequestOp::REQUEST_NOT_SET:
          break;
      }
    }
    return Status::Ok();
  };
  ETCDW_RETURN_IF_ERROR(ops(txn.success()));
  return ops(txn.failure());
}

bool AuthStore::HasRole(std::string_view user, std::string_view role) const {
  std::shared_lock lock(mu_);
  auto u = users_.find(user);
  if (u == users_.end()) return false;
  return std::find(u->second.roles().begin(), u->second.roles().end(), role) !=
         u->second.roles().end();
}

Result<AuthStore::Credentials> AuthStore::CredentialsOf(std::string_view user) const {
  std::shared_lock lock(mu_);
  if (!enabled_) return errors::AuthNotEnabled();
  auto u = users_.find(user);
  if (u == users_.end()) return errors::AuthFailed();
  if (u->second.options().no_password()) return errors::NoPasswordUser();
  return Credentials{u->second.password(), revision_};
}

Status AuthStore::CheckAuthenticate(std::string_view user) const {
  std::shared_lock lock(mu_);
  if (!enabled_) return errors::AuthNotEnabled();
  auto u = users_.find(user);
  if (u == users_.end() || u->second.options().no_password()) return errors::AuthFailed();
  return Status::Ok();
}

void AuthStore::CommitRevision(storage::Batch& batch) {
  ++revision_;
  std::string v;
  storage::PutFixed64BE(v, revision_);
  batch.Put(storage::Column::kMeta, std::string(meta::kAuthRevision.key), v);
}

void AuthStore::StageUser(storage::Batch& batch, const authpb::User& u) {
  batch.Put(storage::Column::kMeta, meta::KeyIn(meta::kAuthUsers, u.name()), u.SerializeAsString());
}

void AuthStore::StageRole(storage::Batch& batch, const authpb::Role& r) {
  batch.Put(storage::Column::kMeta, meta::KeyIn(meta::kAuthRoles, r.name()), r.SerializeAsString());
}

Status AuthStore::StageEnable(storage::Batch& batch) {
  std::unique_lock lock(mu_);
  if (enabled_) return Status::Ok();  // etcd: "authentication is already enabled; ignored"
  auto root = users_.find(kRootUser);
  if (root == users_.end()) return errors::RootUserNotExist();
  if (!HasRootRole(root->second)) return errors::RootRoleNotExist();
  batch.Put(storage::Column::kMeta, std::string(meta::kAuthEnabled.key), std::string(1, '\1'));
  enabled_ = true;  // etcd does not advance the revision here
  log::Info("enabled authentication");
  return Status::Ok();
}

bool AuthStore::StageDisable(storage::Batch& batch) {
  std::unique_lock lock(mu_);
  if (!enabled_) return false;
  batch.Put(storage::Column::kMeta, std::string(meta::kAuthEnabled.key), std::string(1, '\0'));
  CommitRevision(batch);
  enabled_ = false;
  log::Info("disabled authentication");
  return true;
}

Status AuthStore::StageUserAdd(storage::Batch& batch, const etcdserverpb::AuthUserAddRequest& r) {
  if (r.name().empty()) return errors::UserEmpty();
  std::unique_lock lock(mu_);
  if (users_.count(r.name())) return errors::UserAlreadyExist();
  authpb::User u;
  u.set_name(r.name());
  if (!r.options().no_password()) u.set_password(r.hashedpassword());
  u.mutable_options()->set_no_password(r.options().no_password());
  StageUser(batch, u);
  users_[r.name()] = std::move(u);
  CommitRevision(batch);
  RefreshPerms();
  log::Info("added a user", {log::F("user-name", r.name())});
  return Status::Ok();
}

Status AuthStore::StageUserDelete(storage::Batch& batch, const std::string& name) {
  std::unique_lock lock(mu_);
  if (enabled_ && name == kRootUser) return errors::InvalidAuthMgmt();
  auto u = users_.find(name);
  if (u == users_.end()) return errors::UserNotFound();
  batch.Delete(storage::Column::kMeta, meta::KeyIn(meta::kAuthUsers, name));
  users_.erase(u);
  CommitRevision(batch);
  RefreshPerms();
  log::Info("deleted a user", {log::F("user-name", name)});
  return Status::Ok();
}

Status AuthStore::StageUserChangePassword(storage::Batch& batch, const std::string& name,
                                          const std::string& hashed_password) {
  std::unique_lock lock(mu_);
  auto u = users_.find(name);
  if (u == users_.end()) return errors::UserNotFound();
  u->second.set_password(hashed_password);
  StageUser(batch, u->second);
  CommitRevision(batch);
  log::Info("changed a password of a user", {log::F("user-name", name)});
  return Status::Ok();
}

Status AuthStore::StageUserGrantRole(storage::Batch& batch, const std::string& user,
                                     const std::string& role) {
  std::unique_lock lock(mu_);
  auto u = users_.find(user);
  if (u == users_.end()) return errors::UserNotFound();
  if (role != kRootRole && !roles_.count(role)) return errors::RoleNotFound();
  auto* roles = u->second.mutable_roles();
  auto at = std::lower_bound(roles->begin(), roles->end(), role);
  if (at != roles->end() && *at == role) return Status::Ok();  // etcd: ignored, no change
  roles->Add(std::string(role));
  std::sort(roles->begin(), roles->end());
  StageUser(batch, u->second);
  CommitRevision(batch);
  RefreshPerms();
  log::Info("granted a role to a user", {log::F("user-name", user), log::F("role-name", role)});
  return Status::Ok();
}

Status AuthStore::StageUserRevokeRole(storage::Batch& batch, const std::string& user,
                                      const std::string& role) {
  std::unique_lock lock(mu_);
  if (enabled_ && user == kRootUser && role == kRootRole) return errors::InvalidAuthMgmt();
  auto u = users_.find(user);
  if (u == users_.end()) return errors::UserNotFound();
  auto* roles = u->second.mutable_roles();
  auto at = std::find(roles->begin(), roles->end(), role);
  if (at == roles->end()) return errors::RoleNotGranted();
  roles->erase(at);
  StageUser(batch, u->second);
  CommitRevision(batch);
  RefreshPerms();
  log::Info("revoked a role from a user", {log::F("user-name", user), log::F("role-name", role)});
  return Status::Ok();
}

Status AuthStore::StageRoleAdd(storage::Batch& batch, const std::string& name) {
  if (name.empty()) return errors::RoleEmpty();
  std::unique_lock lock(mu_);
  if (roles_.count(name)) return errors::RoleAlreadyExist();
  authpb::Role r;
  r.set_name(name);
  StageRole(batch, r);
  roles_[name] = std::move(r);
  CommitRevision(batch);
  log::Info("created a role", {log::F("role-name", name)});
  return Status::Ok();
}

Status AuthStore::StageRoleDelete(storage::Batch& batch, const std::string& name) {
  std::unique_lock lock(mu_);
  if (enabled_ && name == kRootRole) return errors::InvalidAuthMgmt();
  auto r = roles_.find(name);
  if (r == roles_.end()) return errors::RoleNotFound();
  batch.Delete(storage::Column::kMeta, meta::KeyIn(meta::kAuthRoles, name));
  roles_.erase(r);
  for (auto& [user_name, user] : users_) {
    auto* roles = user.mutable_roles();
    auto at = std::find(roles->begin(), roles->end(), name);
    if (at == roles->end()) continue;
    roles->erase(at);
    StageUser(batch, user);
  }
  CommitRevision(batch);
  RefreshPerms();
  log::Info("deleted a role", {log::F("role-name", name)});
  return Status::Ok();
}

Status AuthStore::StageRoleGrantPermission(storage::Batch& batch, const std::string& role,
                                           const authpb::Permission& perm) {
  std::unique_lock lock(mu_);
  auto r = roles_.find(role);
  if (r == roles_.end()) return errors::RoleNotFound();
  auto* perms = r->second.mutable_keypermission();
  // Kept sorted by key; a permission on the same key and range end is replaced in place.
  auto at = std::lower_bound(
      perms->begin(), perms->end(), perm.key(),
      [](const authpb::Permission& p, const std::string& key) { return p.key() < key; });
  if (at != perms->end() && at->key() == perm.key() && at->range_end() == perm.range_end()) {
    at->set_permtype(perm.permtype());
  } else {
    authpb::Permission* added = perms->Add();
    added->set_key(perm.key());
    added->set_range_end(perm.range_end());
    added->set_permtype(perm.permtype());
    std::stable_sort(
        perms->begin(), perms->end(),
        [](const authpb::Permission& a, const authpb::Permission& b) { return a.key() < b.key(); });
  }
  StageRole(batch, r->second);
  CommitRevision(batch);
  RefreshPerms();
  log::Info("granted/updated a permission to a role",
            {log::F("role-name", role),
             log::F("permission", authpb::Permission::Type_Name(perm.permtype()))});
  return Status::Ok();
}

Status AuthStore::StageRoleRevokePermission(storage::Batch& batch, const std::string& role,
                                            const std::string& key, const std::string& range_end) {
  std::unique_lock lock(mu_);
  auto r = roles_.find(role);
  if (r == roles_.end()) return errors::RoleNotFound();
  auto* perms = r->second.mutable_keypermission();
  const int before = perms->size();
  for (int i = perms->size() - 1; i >= 0; --i) {
    if (perms->Get(i).key() == key && perms->Get(i).range_end() == range_end) {
      perms->DeleteSubrange(i, 1);
    }
  }
  if (perms->size() == before) return errors::PermissionNotGranted();
  StageRole(batch, r->second);
  CommitRevision(batch);
  RefreshPerms();
  log::Info("revoked a permission on range", {log::F("role-name", role)});
  return Status::Ok();
}

Result<std::vector<std::string>> AuthStore::UserRoles(std::string_view user) const {
  std::shared_lock lock(mu_);
  auto u = users_.find(user);
  if (u == users_.end()) return errors::UserNotFound();
  return std::vector<std::string>(u->second.roles().begin(), u->second.roles().end());
}

Result<std::vector<authpb::Permission>> AuthStore::RolePermissions(std::string_view role) const {
  std::shared_lock lock(mu_);
  auto r = roles_.find(role);
  if (r == roles_.end()) return errors::RoleNotFound();
  return std::vector<authpb::Permission>(r->second.keypermission().begin(),
                                         r->second.keypermission().end());
}

std::vector<std::string> AuthStore::UserNames() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, u] : users_) out.push_back(name);
  return out;
}

std::vector<std::string> AuthStore::RoleNames() const {
  std::shared_lock lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, r] : roles_) out.push_back(name);
  return out;
}

std::vector<authpb::User> AuthStore::Users() const {
  std::shared_lock lock(mu_);
  std::vector<authpb::User> out;
  for (const auto& [name, u] : users_) out.push_back(u);
  return out;
}

std::vector<authpb::Role> AuthStore::Roles() const {
  std::shared_lock lock(mu_);
  std::vector<authpb::Role> out;
  for (const auto& [name, r] : roles_) out.push_back(r);
  return out;
}

}  // namespace etcdw::member

// EtcdServer's Auth API (etcd_server.h): user and role management proposed through the log and
// judged by the auth store when applied; Authenticate with the password compared off the
// member's busy threads; tokens resolved for the client API.
#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/password_hash.h"
#include "etcdw/member/etcd_server.h"
#include "etcdw/member/raft_node.h"

namespace etcdw::member {

using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)

namespace {

// How often Authenticate starts again when the auth store changed between the password check
// and the token's entry (etcd retries without a bound; a store changing that often is a
// client's loop, which gets AuthOldRevision instead).
constexpr int kAuthenticateAttempts = 5;

// The proposal of an Auth call whose request enters the log as the client sent it, in `field`.
template <typename Req>
internalpb::Request AsProposed(const Req& r, Req* (internalpb::Request::*field)()) {
  internalpb::Request req;
  *(req.*field)() = r;
  return req;
}

}  // namespace

Result<AuthInfo> EtcdServer::AuthInfoFromToken(const std::string& token) {
  if (auto info = tokens_->Info(token, auth_->Revision())) return std::move(*info);
  return errors::InvalidAuthToken();
}

bool EtcdServer::TokenEntryPending(const std::string& token) const {
  const std::optional<uint64_t> issued_at = tokens_->IssuedAt(token);
  return issued_at && *issued_at > applier_->AppliedIndex();
}

void EtcdServer::WaitForTokenEntry(std::function<void()> then) {
  node_->ReadIndex([this, then = std::move(then)](Status) { reads_->Submit(then); });
}

void EtcdServer::HashThen(std::string password, std::function<void(Result<std::string>)> then) {
  const int cost = static_cast<int>(cfg_.bcrypt_cost);
  tasks_->Submit([password = std::move(password), cost, then = std::move(then)] {
    then(common::HashPassword(password, cost));
  });
}

void EtcdServer::AuthEnable(Reply<AuthEnableResponse> reply, Who who) {
  ProposeAs(AsProposed(AuthEnableRequest(), &internalpb::Request::mutable_auth_enable), who,
            std::move(reply));
}

void EtcdServer::AuthDisable(Reply<AuthDisableResponse> reply, Who who) {
  ProposeAs(AsProposed(AuthDisableRequest(), &internalpb::Request::mutable_auth_disable), who,
            std::move(reply));
}

void EtcdServer::AuthStatus(Reply<AuthStatusResponse> reply) {
  auto serve = [this, reply](Status st) {
    if (!st.ok()) return reply(st);
    AuthStatusResponse resp;
    resp.set_enabled(auth_->Enabled());
    resp.set_authrevision(auth_->Revision());
    reply(std::move(resp));
  };
  if (node_->CanReadLocally()) return serve(Status::Ok());
  node_->ReadIndex([this, serve](Status st) { reads_->Submit([serve, st] { serve(st); }); });
}

void EtcdServer::Authenticate(const AuthenticateRequest& r, Reply<AuthenticateResponse> reply) {
  AuthenticateAttempt(r.name(), r.password(), std::move(reply), kAuthenticateAttempts);
}

void EtcdServer::AuthenticateAttempt(std::string name, std::string password,
                                     Reply<AuthenticateResponse> reply, int attempts_left) {
  // The password is compared against current state: after a ReadIndex round, as etcd does.
  auto check = [this, name, password, reply, attempts_left](Status st) {
    if (!st.ok()) return reply(st);
    auto creds = auth_->CredentialsOf(name);
    if (!creds.ok()) return reply(creds.status());
    tasks_->Submit([this, name, password, reply, attempts_left, creds = *creds] {
      if (!common::PasswordMatches(creds.password_hash, password))
        return reply(errors::AuthFailed());
      internalpb::Request req;
      req.mutable_authenticate()->set_name(name);
      req.mutable_authenticate()->set_simple_token(tokens_->NewPrefix());
      ProposeFor<AuthenticateResponse>(
          std::move(req), [this, name, password, reply, attempts_left,
                           checked = creds.revision](Result<AuthenticateResponse> got) {
            if (!got.ok() || checked == auth_->Revision()) return reply(std::move(got));
            // The store changed after the password was checked (say, the password itself):
            // check again rather than hand out a token for a stale password.
            if (attempts_left <= 1) return reply(errors::AuthOldRevision());
            RunSoon([this, name, password, reply, attempts_left] {
              AuthenticateAttempt(name, password, reply, attempts_left - 1);
            });
          });
    });
  };
  if (node_->CanReadLocally()) return check(Status::Ok());
  node_->ReadIndex([this, check](Status st) { reads_->Submit([check, st] { check(st); }); });
}

void EtcdServer::UserAdd(const AuthUserAddRequest& r, Reply<AuthUserAddResponse> reply, Who who) {
  // Built afresh: the plain password never enters the log.
  internalpb::Request req;
  AuthUserAddRequest* add = req.mutable_user_add();
  add->set_name(r.name());
  *add->mutable_options() = r.options();
  if (r.options().no_password()) return ProposeAs(std::move(req), who, std::move(reply));
  HashThen(r.password(), [this, req = std::move(req), who, reply](Result<std::string> hash) {
    if (!hash.ok()) return reply(hash.status());
    internalpb::Request hashed = req;
    hashed.mutable_user_add()->set_hashedpassword(*hash);
    ProposeAs(std::move(hashed), who, reply);
  });
}

void EtcdServer::UserChangePassword(const AuthUserChangePasswordRequest& r,
                                    Reply<AuthUserChangePasswordResponse> reply, Who who) {
  HashThen(r.password(), [this, name = r.name(), who, reply](Result<std::string> hash) {
    if (!hash.ok()) return reply(hash.status());
    internalpb::Request req;
    req.mutable_user_change_password()->set_name(name);
    req.mutable_user_change_password()->set_hashedpassword(*hash);
    ProposeAs(std::move(req), who, reply);
  });
}

void EtcdServer::UserGet(const AuthUserGetRequest& r, Reply<AuthUserGetResponse> reply, Who who) {
  ProposeAs(AsProposed(r, &internalpb::Request::mutable_user_get), who, std::move(reply));
}

void EtcdServer::UserList(Reply<AuthUserListResponse> reply, Who who) {
  ProposeAs(AsProposed(AuthUserListRequest(), &internalpb::Request::mutable_user_list), who,
            std::move(reply));
}

void EtcdServer::UserDelete(const AuthUserDeleteRequest& r, Reply<AuthUserDeleteResponse> reply,
                            Who who) {
  ProposeAs(AsProposed(r, &internalpb::Request::mutable_user_delete), who, std::move(reply));
}

void EtcdServer::UserGrantRole(const AuthUserGrantRoleRequest& r,
                               Reply<AuthUserGrantRoleResponse> reply, Who who) {
  ProposeAs(AsProposed(r, &internalpb::Request::mutable_user_grant_role), who, std::move(reply));
}

void EtcdServer::UserRevokeRole(const AuthUserRevokeRoleRequest& r,
                                Reply<AuthUserRevokeRoleResponse> reply, Who who) {
  ProposeAs(AsProposed(r, &internalpb::Request::mutable_user_revoke_role), who, std::move(reply));
}

void EtcdServer::RoleAdd(const AuthRoleAddRequest& r, Reply<AuthRoleAddResponse> reply, Who who) {
  ProposeAs(AsProposed(r, &internalpb::Request::mutable_role_add), who, std::move(reply));
}

void EtcdServer::RoleGet(const AuthRoleGetRequest& r, Reply<AuthRoleGetResponse> reply, Who who) {
  ProposeAs(AsProposed(r, &internalpb::Request::mutable_role_get), who, std::move(reply));
}

void EtcdServer::RoleList(Reply<AuthRoleListResponse> reply, Who who) {
  ProposeAs(AsProposed(AuthRoleListRequest(), &internalpb::Request::mutable_role_list), who,
            std::move(reply));
}

void EtcdServer::RoleDelete(const AuthRoleDeleteRequest& r, Reply<AuthRoleDeleteResponse> reply,
                            Who who) {
  ProposeAs(AsProposed(r, &internalpb::Request::mutable_role_delete), who, std::move(reply));
}

void EtcdServer::RoleGrantPermission(const AuthRoleGrantPermissionRequest& r,
                                     Reply<AuthRoleGrantPermissionResponse> reply, Who who) {
  ProposeAs(AsProposed(r, &internalpb::Request::mutable_role_grant_permission), who,
            std::move(reply));
}

void EtcdServer::RoleRevokePermission(const AuthRoleRevokePermissionRequest& r,
                                      Reply<AuthRoleRevokePermissionResponse> reply, Who who) {
  ProposeAs(AsProposed(r, &internalpb::Request::mutable_role_revoke_permission), who,
            std::move(reply));
}

}  // namespace etcdw::member

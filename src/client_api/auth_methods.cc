// etcdserverpb.Auth on the client API server, and the caller's identity every other method
// asks for (CallerOf, CheckIdentity). The work is EtcdServer's (etcd_server_auth.cc); as in
// etcd, these calls go through the log and are judged by the auth store when applied.
#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "method_table.h"

namespace etcdw::client_api {

Result<member::AuthInfo> CallerOf(member::EtcdServer& s, const CallContext& ctx) {
  if (ctx.token) return s.AuthInfoFromToken(*ctx.token);
  if (!ctx.cert_common_name.empty()) {
    return member::AuthInfo{ctx.cert_common_name, s.auth().Revision()};
  }
  return member::AuthInfo{};
}

namespace {

// An error of etcd's auth package as its Go text, not converted to etcd's gRPC error.
Status Unconverted(const Status& st) {
  if (st.ok()) return st;
  std::string text = "auth: permission denied";
  if (st == errors::UserEmpty()) text = "auth: user name is empty";
  if (st == errors::UserNotFound()) text = "auth: user not found";
  if (st == errors::InvalidAuthToken()) text = "auth: invalid auth token";
  return Status(Code::kUnknown, text);
}

}  // namespace

Status CheckIdentity(member::EtcdServer& s, const CallContext& ctx, Identity required) {
  if (required == Identity::kNone) return Status::Ok();
  auto who = CallerOf(s, ctx);
  Status st = who.status();
  if (st.ok() && (required == Identity::kAdmin || required == Identity::kMaintenanceAdmin)) {
    st = s.auth().CheckAdmin(*who);
  }
  const bool maintenance =
      required == Identity::kMaintenanceAdmin || required == Identity::kMaintenanceValidToken;
  return maintenance ? Unconverted(st) : st;
}

namespace {

using member::EtcdServer;

// A call that takes no request fields besides its caller (AuthEnable, UserList, ...).
template <typename Req, typename Resp>
void AddBare(MethodTable& t, EtcdServer& s, std::string path,
             void (EtcdServer::*call)(member::Reply<Resp>, EtcdServer::Who)) {
  t.AddUnary<Req, Resp>(s, std::move(path),
                        [&s, call](const CallContext& ctx, const Req&, member::Reply<Resp> done) {
                          if (s.IsLearner()) return done(errors::NotSupportedForLearner());
                          auto who = CallerOf(s, ctx);
                          if (!who.ok()) return done(who.status());
                          (s.*call)(std::move(done), *who);
                        });
}

}  // namespace

void AddAuthMethods(MethodTable& t, EtcdServer& s) {
  using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)
  const std::string svc = "/etcdserverpb.Auth/";
  AddBare<AuthEnableRequest, AuthEnableResponse>(t, s, svc + "AuthEnable", &EtcdServer::AuthEnable);
  AddBare<AuthDisableRequest, AuthDisableResponse>(t, s, svc + "AuthDisable",
                                                   &EtcdServer::AuthDisable);
  t.AddUnary<AuthStatusRequest, AuthStatusResponse>(
      s, svc + "AuthStatus",
      [&s](const AuthStatusRequest&, member::Reply<AuthStatusResponse> done) {
        if (s.IsLearner()) return done(errors::NotSupportedForLearner());
        s.AuthStatus(std::move(done));
      });
  // Authenticate needs no token: it is how a client gets one.
  t.AddRefusedOnLearner<AuthenticateRequest, AuthenticateResponse>(s, svc + "Authenticate",
                                                                   &EtcdServer::Authenticate);
  t.AddAsCaller<AuthUserAddRequest, AuthUserAddResponse>(s, svc + "UserAdd", &EtcdServer::UserAdd);
  t.AddAsCaller<AuthUserGetRequest, AuthUserGetResponse>(s, svc + "UserGet", &EtcdServer::UserGet);
  AddBare<AuthUserListRequest, AuthUserListResponse>(t, s, svc + "UserList", &EtcdServer::UserList);
  t.AddAsCaller<AuthUserDeleteRequest, AuthUserDeleteResponse>(s, svc + "UserDelete",
                                                               &EtcdServer::UserDelete);
  t.AddAsCaller<AuthUserChangePasswordRequest, AuthUserChangePasswordResponse>(
      s, svc + "UserChangePassword", &EtcdServer::UserChangePassword);
  t.AddAsCaller<AuthUserGrantRoleRequest, AuthUserGrantRoleResponse>(s, svc + "UserGrantRole",
                                                                     &EtcdServer::UserGrantRole);
  t.AddAsCaller<AuthUserRevokeRoleRequest, AuthUserRevokeRoleResponse>(s, svc + "UserRevokeRole",
                                                                       &EtcdServer::UserRevokeRole);
  t.AddAsCaller<AuthRoleAddRequest, AuthRoleAddResponse>(s, svc + "RoleAdd", &EtcdServer::RoleAdd);
  t.AddAsCaller<AuthRoleGetRequest, AuthRoleGetResponse>(s, svc + "RoleGet", &EtcdServer::RoleGet);
  AddBare<AuthRoleListRequest, AuthRoleListResponse>(t, s, svc + "RoleList", &EtcdServer::RoleList);
  t.AddAsCaller<AuthRoleDeleteRequest, AuthRoleDeleteResponse>(s, svc + "RoleDelete",
                                                               &EtcdServer::RoleDelete);
  t.AddAsCaller<AuthRoleGrantPermissionRequest, AuthRoleGrantPermissionResponse>(
      s, svc + "RoleGrantPermission", &EtcdServer::RoleGrantPermission);
  t.AddAsCaller<AuthRoleRevokePermissionRequest, AuthRoleRevokePermissionResponse>(
      s, svc + "RoleRevokePermission", &EtcdServer::RoleRevokePermission);
}

}  // namespace etcdw::client_api

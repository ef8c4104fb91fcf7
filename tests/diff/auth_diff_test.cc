// Differential tests of Auth: every call of the Auth service, its errors, and the permission
// checks of the other services, against etcd 3.4.23. Tokens differ between the servers, so each
// side's token for a user is kept per client and sent as the "token" metadata, as etcd's
// clients send it.
#include <openssl/evp.h>

#include <map>
#include <regex>

#include "diff_fixture.h"
#include "test_certs.h"

namespace etcdw::testing {
namespace {

using namespace etcdserverpb;  // NOLINT(google-build-using-namespace)

class AuthDiffTest : public DiffTest {
 protected:
  // Calls `call` on both as `user` ("" sends no token; "bad" sends a token neither knows).
  template <typename Resp>
  Outcome As(const std::string& user, const CallFn<Resp>& call, const std::string& what,
             const NormFn<Resp>& norm = nullptr) {
    return Same<Resp>(
        [&](Client& c, grpc::ClientContext* ctx, Resp* out) {
          if (user == "bad") {
            ctx->AddMetadata("token", "XXXXXXXXXXXXXXXX.1");
          } else if (!user.empty()) {
            ctx->AddMetadata("token", tokens_[{&MemberOf(c), user}]);
          }
          return call(c, ctx, out);
        },
        user + ": " + what, norm);
  }
  // Authenticates `user` on both; the answers (errors included) must be the same. The tokens
  // differ: they are kept, and the answers compared without them.
  Outcome Login(const std::string& user, const std::string& password) {
    AuthenticateRequest r;
    r.set_name(user);
    r.set_password(password);
    return Same<AuthenticateResponse>(
        [&](Client& c, grpc::ClientContext* ctx, AuthenticateResponse* out) {
          grpc::Status st = c.auth->Authenticate(ctx, r, out);
          if (st.ok()) {
            EXPECT_FALSE(out->token().empty());
            tokens_[{&MemberOf(c), user}] = out->token();
          }
          return st;
        },
        "authenticate " + user, [](Member&, AuthenticateResponse* resp) { resp->clear_token(); });
  }
  Outcome UserAdd(const std::string& as, const std::string& name, const std::string& pw,
                  bool no_password = false) {
    AuthUserAddRequest r;
    r.set_name(name);
    r.set_password(pw);
    if (no_password) r.mutable_options()->set_no_password(true);
    return As<AuthUserAddResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, AuthUserAddResponse* out) {
          return c.auth->UserAdd(ctx, r, out);
        },
        "user add " + name);
  }
  Outcome RoleAdd(const std::string& as, const std::string& name) {
    AuthRoleAddRequest r;
    r.set_name(name);
    return As<AuthRoleAddResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, AuthRoleAddResponse* out) {
          return c.auth->RoleAdd(ctx, r, out);
        },
        "role add " + name);
  }
  Outcome Grant(const std::string& as, const std::string& user, const std::string& role) {
    AuthUserGrantRoleRequest r;
    r.set_user(user);
    r.set_role(role);
    return As<AuthUserGrantRoleResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, AuthUserGrantRoleResponse* out) {
          return c.auth->UserGrantRole(ctx, r, out);
        },
        "grant " + role + " to " + user);
  }
  Outcome Revoke(const std::string& as, const std::string& user, const std::string& role) {
    AuthUserRevokeRoleRequest r;
    r.set_name(user);
    r.set_role(role);
    return As<AuthUserRevokeRoleResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, AuthUserRevokeRoleResponse* out) {
          return c.auth->UserRevokeRole(ctx, r, out);
        },
        "revoke " + role + " from " + user);
  }
  Outcome Permit(const std::string& as, const std::string& role, authpb::Permission::Type type,
                 const std::string& key, const std::string& end) {
    AuthRoleGrantPermissionRequest r;
    r.set_name(role);
    r.mutable_perm()->set_permtype(type);
    r.mutable_perm()->set_key(key);
    r.mutable_perm()->set_range_end(end);
    return As<AuthRoleGrantPermissionResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, AuthRoleGrantPermissionResponse* out) {
          return c.auth->RoleGrantPermission(ctx, r, out);
        },
        "permit " + role + " " + r.perm().ShortDebugString());
  }
  Outcome Unpermit(const std::string& as, const std::string& role, const std::string& key,
                   const std::string& end) {
    AuthRoleRevokePermissionRequest r;
    r.set_role(role);
    r.set_key(key);
    r.set_range_end(end);
    return As<AuthRoleRevokePermissionResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, AuthRoleRevokePermissionResponse* out) {
          return c.auth->RoleRevokePermission(ctx, r, out);
        },
        "unpermit " + role + " [" + key + ", " + end + ")");
  }
  Outcome Enable(const std::string& as) {
    return As<AuthEnableResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, AuthEnableResponse* out) {
          return c.auth->AuthEnable(ctx, AuthEnableRequest(), out);
        },
        "auth enable");
  }
  Outcome Disable(const std::string& as) {
    return As<AuthDisableResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, AuthDisableResponse* out) {
          return c.auth->AuthDisable(ctx, AuthDisableRequest(), out);
        },
        "auth disable");
  }
  Outcome GetAs(const std::string& as, const std::string& key, const std::string& end = "") {
    RangeRequest r;
    r.set_key(key);
    r.set_range_end(end);
    return As<RangeResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, RangeResponse* out) {
          return c.kv->Range(ctx, r, out);
        },
        "get [" + key + ", " + end + ")");
  }
  Outcome PutAs(const std::string& as, const std::string& key, const std::string& value,
                int64_t lease = 0, bool prev_kv = false) {
    PutRequest r;
    r.set_key(key);
    r.set_value(value);
    r.set_lease(lease);
    r.set_prev_kv(prev_kv);
    return As<PutResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, PutResponse* out) {
          return c.kv->Put(ctx, r, out);
        },
        "put " + key);
  }
  Outcome DeleteAs(const std::string& as, const std::string& key, const std::string& end,
                   bool prev_kv = false) {
    DeleteRangeRequest r;
    r.set_key(key);
    r.set_range_end(end);
    r.set_prev_kv(prev_kv);
    return As<DeleteRangeResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, DeleteRangeResponse* out) {
          return c.kv->DeleteRange(ctx, r, out);
        },
        "delete [" + key + ", " + end + ")");
  }
  Outcome TxnAs(const std::string& as, const TxnRequest& r, const std::string& what) {
    return As<TxnResponse>(
        as,
        [&](Client& c, grpc::ClientContext* ctx, TxnResponse* out) {
          return c.kv->Txn(ctx, r, out);
        },
        what);
  }

  // root (with the root role) and alice (role "reader": read /a/ prefix and the key /b; role
  // "writer": write [/w/, /x) and the key /b), then authentication enabled.
  void SetUpUsers() {
    EXPECT_TRUE(UserAdd("", "root", "rootpw").ok());
    EXPECT_TRUE(RoleAdd("", "root").ok());
    EXPECT_TRUE(Grant("", "root", "root").ok());
    EXPECT_TRUE(UserAdd("", "alice", "alicepw").ok());
    EXPECT_TRUE(RoleAdd("", "reader").ok());
    EXPECT_TRUE(RoleAdd("", "writer").ok());
    EXPECT_TRUE(Permit("", "reader", authpb::Permission::READ, "/a/", "/a0").ok());
    EXPECT_TRUE(Permit("", "reader", authpb::Permission::READ, "/b", "").ok());
    EXPECT_TRUE(Permit("", "writer", authpb::Permission::WRITE, "/w/", "/x").ok());
    EXPECT_TRUE(Permit("", "writer", authpb::Permission::READWRITE, "/b", "").ok());
    EXPECT_TRUE(Grant("", "alice", "reader").ok());
    EXPECT_TRUE(Grant("", "alice", "writer").ok());
    EXPECT_TRUE(Enable("").ok());
    EXPECT_TRUE(Login("root", "rootpw").ok());
    EXPECT_TRUE(Login("alice", "alicepw").ok());
  }

  // Each side's token per user, by member (its client is replaced when it restarts).
  std::map<std::pair<Member*, std::string>, std::string> tokens_;
};

TEST_F(AuthDiffTest, ManagementCallsAndTheirErrorsAreEtcds) {
  StartBoth();
  UserAdd("", "", "x");  // user name is empty
  RoleAdd("", "");       // role name is empty
  Enable("");            // root user does not exist
  UserAdd("", "root", "rootpw");
  Enable("");                    // root user does not have root role
  UserAdd("", "root", "again");  // user name already exists
  Grant("", "root", "root");     // the root role need not exist
  Grant("", "root", "root");     // granted twice: no error
  Grant("", "nobody", "root");   // user name not found
  Grant("", "root", "missing");  // role name not found
  RoleAdd("", "r1");
  RoleAdd("", "r1");            // role name already exists
  Revoke("", "root", "r1");     // role is not granted to the user
  Revoke("", "nobody", "r1");   // user name not found
  Unpermit("", "r1", "k", "");  // permission is not granted to the role
  Unpermit("", "missing", "k", "");
  Permit("", "missing", authpb::Permission::READ, "k", "");
  Permit("", "r1", authpb::Permission::WRITE, "k2", "");
  Permit("", "r1", authpb::Permission::READ, "k1", "k3");
  Permit("", "r1", authpb::Permission::READWRITE, "k2", "");  // replaces the same key's
  Permit("", "r1", authpb::Permission::READ, "a", std::string(1, '\0'));
  UserAdd("", "nopw", "", /*no_password=*/true);
  Grant("", "nopw", "r1");
  for (const std::string user : {"root", "nopw", "nobody"}) {
    AuthUserGetRequest r;
    r.set_name(user);
    As<AuthUserGetResponse>(
        "",
        [&](Client& c, grpc::ClientContext* ctx, AuthUserGetResponse* out) {
          return c.auth->UserGet(ctx, r, out);
        },
        "user get " + user);
  }
  for (const std::string role : {"r1", "root", "missing"}) {
    AuthRoleGetRequest r;
    r.set_role(role);
    As<AuthRoleGetResponse>(
        "",
        [&](Client& c, grpc::ClientContext* ctx, AuthRoleGetResponse* out) {
          return c.auth->RoleGet(ctx, r, out);
        },
        "role get " + role);
  }
  As<AuthUserListResponse>(
      "",
      [&](Client& c, grpc::ClientContext* ctx, AuthUserListResponse* out) {
        return c.auth->UserList(ctx, AuthUserListRequest(), out);
      },
      "user list");
  As<AuthRoleListResponse>(
      "",
      [&](Client& c, grpc::ClientContext* ctx, AuthRoleListResponse* out) {
        return c.auth->RoleList(ctx, AuthRoleListRequest(), out);
      },
      "role list");
  Login("root", "rootpw");  // authentication is not enabled
  Disable("");              // not enabled: no error
  // A token nobody issued is refused even while authentication is disabled.
  GetAs("bad", "k");
  // Deleting a role takes it from its users; deleting users and roles that do not exist.
  AuthRoleDeleteRequest rd;
  rd.set_role("r1");
  for (int i = 0; i < 2; ++i) {
    As<AuthRoleDeleteResponse>(
        "",
        [&](Client& c, grpc::ClientContext* ctx, AuthRoleDeleteResponse* out) {
          return c.auth->RoleDelete(ctx, rd, out);
        },
        "role delete r1");
  }
  AuthUserGetRequest ug;
  ug.set_name("nopw");
  As<AuthUserGetResponse>(
      "",
      [&](Client& c, grpc::ClientContext* ctx, AuthUserGetResponse* out) {
        return c.auth->UserGet(ctx, ug, out);
      },
      "user get nopw after its role went");
  AuthUserDeleteRequest ud;
  ud.set_name("nopw");
  for (int i = 0; i < 2; ++i) {
    As<AuthUserDeleteResponse>(
        "",
        [&](Client& c, grpc::ClientContext* ctx, AuthUserDeleteResponse* out) {
          return c.auth->UserDelete(ctx, ud, out);
        },
        "user delete nopw");
  }
  // Enabled: wrong passwords, unknown users, and root's own protections.
  Enable("");
  Enable("");  // already enabled
  Login("root", "wrong");
  Login("nobody", "x");
  Login("root", "rootpw");
  AuthUserDeleteRequest del_root;
  del_root.set_name("root");
  As<AuthUserDeleteResponse>(
      "root",
      [&](Client& c, grpc::ClientContext* ctx, AuthUserDeleteResponse* out) {
        return c.auth->UserDelete(ctx, del_root, out);
      },
      "delete root");
  Revoke("root", "root", "root");
  AuthRoleDeleteRequest del_root_role;
  del_root_role.set_role("root");
  As<AuthRoleDeleteResponse>(
      "root",
      [&](Client& c, grpc::ClientContext* ctx, AuthRoleDeleteResponse* out) {
        return c.auth->RoleDelete(ctx, del_root_role, out);
      },
      "delete the root role");
  UserAdd("", "eve", "x");  // user name is empty: no token
  UserAdd("bad", "eve", "x");
  Disable("root");
  GetAs("", "k");
}

TEST_F(AuthDiffTest, EveryRequestIsCheckedAsEtcdChecksIt) {
  StartBoth();
  PutBoth("/a/1", "v");
  PutBoth("/c", "v");
  SetUpUsers();
  // No token, an unknown token, root, and alice's roles.
  for (const std::string who : {"", "bad", "root", "alice"}) {
    GetAs(who, "/a/1");
    GetAs(who, "/a/", "/a0");
    GetAs(who, "/a/", "/a1");  // wider than the permission
    GetAs(who, "/b");
    GetAs(who, "/c");
    GetAs(who, "/", std::string(1, '\0'));
    PutAs(who, "/w/1", "v");
    PutAs(who, "/a/1", "v");  // read only
    PutAs(who, "/b", "v", 0, /*prev_kv=*/true);
    PutAs(who, "/w/2", "v", 0, /*prev_kv=*/true);  // prev_kv needs read permission
    DeleteAs(who, "/w/", "/x");
    DeleteAs(who, "/w/", "/x", /*prev_kv=*/true);
    DeleteAs(who, "/w/", "/z");
  }
  // Transactions: compares need read permission, each branch's operations their own.
  TxnRequest t;
  auto* cmp = t.add_compare();
  cmp->set_key("/b");
  cmp->set_target(Compare::VERSION);
  cmp->set_result(Compare::GREATER);
  cmp->set_version(0);
  t.add_success()->mutable_request_put()->set_key("/w/3");
  t.add_failure()->mutable_request_range()->set_key("/a/1");
  for (const std::string who : {"", "alice", "root"}) TxnAs(who, t, "txn put /w/3");
  t.mutable_compare(0)->set_key("/c");
  for (const std::string who : {"alice", "root"}) TxnAs(who, t, "txn compares /c");
  TxnRequest ro;
  ro.add_success()->mutable_request_range()->set_key("/b");
  ro.add_failure()->mutable_request_range()->set_key("/c");
  for (const std::string who : {"alice", "root"}) TxnAs(who, ro, "read-only txn, /c in failure");
  // Leases: alice may not revoke a lease holding a key she cannot write.
  LeaseGrant(7001, 60);
  PutAs("root", "/c", "leased", 7001);
  PutAs("alice", "/w/9", "v", 7001);  // attaching to that lease is refused too
  for (const std::string who : {"alice", "root"}) {
    LeaseRevokeRequest r;
    r.set_id(7001);
    As<LeaseRevokeResponse>(
        who,
        [&](Client& c, grpc::ClientContext* ctx, LeaseRevokeResponse* out) {
          return c.lease->LeaseRevoke(ctx, r, out);
        },
        "revoke 7001");
  }
  // Maintenance and membership calls reserved to root; the others open to all.
  for (const std::string who : {"", "bad", "alice", "root"}) {
    As<HashKVResponse>(
        who,
        [&](Client& c, grpc::ClientContext* ctx, HashKVResponse* out) {
          return c.maintenance->HashKV(ctx, HashKVRequest(), out);
        },
        "hashkv", [](Member&, HashKVResponse* r) { r->set_hash(r->hash() != 0); });
    As<AlarmResponse>(
        who,
        [&](Client& c, grpc::ClientContext* ctx, AlarmResponse* out) {
          return c.maintenance->Alarm(ctx, AlarmRequest(), out);
        },
        "alarm list");
    MemberRemoveRequest mr;
    mr.set_id(12345);
    As<MemberRemoveResponse>(
        who,
        [&](Client& c, grpc::ClientContext* ctx, MemberRemoveResponse* out) {
          return c.cluster->MemberRemove(ctx, mr, out);
        },
        "member remove");
    // Users may read themselves and their roles; not others.
    for (const std::string name : {"alice", "root"}) {
      AuthUserGetRequest r;
      r.set_name(name);
      As<AuthUserGetResponse>(
          who,
          [&](Client& c, grpc::ClientContext* ctx, AuthUserGetResponse* out) {
            return c.auth->UserGet(ctx, r, out);
          },
          "user get " + name);
    }
    for (const std::string role : {"reader", "root"}) {
      AuthRoleGetRequest r;
      r.set_role(role);
      As<AuthRoleGetResponse>(
          who,
          [&](Client& c, grpc::ClientContext* ctx, AuthRoleGetResponse* out) {
            return c.auth->RoleGet(ctx, r, out);
          },
          "role get " + role);
    }
  }
  // A user without a password cannot log in, with or without one.
  EXPECT_TRUE(UserAdd("root", "nopw", "", /*no_password=*/true).ok());
  Login("nopw", "x");
  Login("nopw", "");
  // A change of the auth state does not end a simple token; deleting its user does.
  EXPECT_TRUE(Revoke("root", "alice", "writer").ok());
  PutAs("alice", "/w/1", "v");
  GetAs("alice", "/b");
  AuthUserDeleteRequest del;
  del.set_name("alice");
  As<AuthUserDeleteResponse>(
      "root",
      [&](Client& c, grpc::ClientContext* ctx, AuthUserDeleteResponse* out) {
        return c.auth->UserDelete(ctx, del, out);
      },
      "delete alice");
  GetAs("alice", "/b");
}

TEST_F(AuthDiffTest, WatchersNeedReadPermissionWhenCreated) {
  StartBoth();
  SetUpUsers();
  for (const std::string who : {"", "bad", "alice"}) {
    std::vector<std::string> got;
    for (Member* m : both()) {
      grpc::ClientContext ctx;
      if (who == "bad") ctx.AddMetadata("token", "XXXXXXXXXXXXXXXX.1");
      if (who == "alice") ctx.AddMetadata("token", tokens_[{m, who}]);
      auto stream = m->client().watch->Watch(&ctx);
      std::string seen;
      for (const auto& [key, end] : std::vector<std::pair<std::string, std::string>>{
               {"/c", ""}, {"/a/", "/a0"}, {"/a/", std::string(1, '\0')}, {"/b", ""}}) {
        ASSERT_TRUE(stream->Write(CreateWatch(key, end)));
        WatchResponse resp;
        ASSERT_TRUE(stream->Read(&resp));
        NormalizeHeaders(&resp);
        seen += resp.ShortDebugString() + "\n";
      }
      ctx.TryCancel();
      stream->Finish();
      got.push_back(seen);
    }
    EXPECT_EQ(got[0], got[1]) << "watch creation as \"" << who << "\" differs from etcd";
  }
}

TEST_F(AuthDiffTest, AuthSurvivesARestartButTokensDoNot) {
  StartBoth();
  SetUpUsers();
  // etcd re-applies, when it restarts, the log entries after the last one that wrote a key (its
  // consistent index moves with key writes only), Authenticate entries included: a simple
  // token issued after the last write comes back. A write after the logins, as any busy
  // cluster has, makes the tokens die with the process, as ours always do.
  EXPECT_TRUE(PutAs("root", "/after-logins", "v").ok());
  RestartBoth();
  GetAs("alice", "/b");  // the token died with the process
  Login("alice", "alicepw");
  GetAs("alice", "/b");
  GetAs("alice", "/c");
  GetAs("", "/b");
  Login("root", "rootpw");
  As<AuthUserListResponse>(
      "root",
      [&](Client& c, grpc::ClientContext* ctx, AuthUserListResponse* out) {
        return c.auth->UserList(ctx, AuthUserListRequest(), out);
      },
      "user list after restart");
}

// JWT tokens (auth-token "jwt,..."): both sides are given the same EC key, so each must accept
// the other's tokens: ours are what jwt-go writes and ours verify what jwt-go signs.
class JwtAuthDiffTest : public AuthDiffTest {
 protected:
  void SetUp() override { ASSERT_TRUE(certs_.AddCa("jwt")) << certs_.log(); }
  std::string Setting(bool with_private_key) const {
    std::string s = "jwt,pub-key=" + certs_.Crt("jwt") + ",sign-method=ES256,ttl=5m";
    if (with_private_key) s += ",priv-key=" + certs_.Key("jwt");
    return s;
  }
  // The claims segment of a token, decoded.
  static std::string Claims(const std::string& token) {
    const size_t a = token.find('.') + 1;
    std::string seg = token.substr(a, token.find('.', a) - a);
    for (char& c : seg) c = c == '-' ? '+' : c == '_' ? '/' : c;
    size_t pad = 0;
    while (seg.size() % 4 != 0) {
      seg += '=';
      ++pad;
    }
    std::string out(seg.size(), '\0');
    const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                  reinterpret_cast<const unsigned char*>(seg.data()),
                                  static_cast<int>(seg.size()));
    out.resize(n < 0 ? 0 : static_cast<size_t>(n) - pad);
    return out;
  }

  TestCerts certs_;
};

TEST_F(JwtAuthDiffTest, TokensAreInterchangeableWithEtcdsAndAgeWithTheAuthRevision) {
  StartBoth({{"auth-token", Setting(/*with_private_key=*/true)}});
  SetUpUsers();
  const std::string etcd_token = tokens_[{&etcd(), "alice"}];
  const std::string our_token = tokens_[{&ours(), "alice"}];
  // The same claims, but for the second each side read its clock at.
  const std::regex exp_claim(R"("exp":([0-9]+))");
  std::smatch e, o;
  const std::string etcd_claims = Claims(etcd_token), our_claims = Claims(our_token);
  ASSERT_TRUE(std::regex_search(etcd_claims, e, exp_claim)) << etcd_claims;
  ASSERT_TRUE(std::regex_search(our_claims, o, exp_claim)) << our_claims;
  EXPECT_LE(std::abs(std::stoll(e[1]) - std::stoll(o[1])), 5) << etcd_claims << our_claims;
  EXPECT_EQ(std::regex_replace(etcd_claims, exp_claim, "\"exp\":0"),
            std::regex_replace(our_claims, exp_claim, "\"exp\":0"));
  EXPECT_EQ(etcd_token.substr(0, etcd_token.find('.')), our_token.substr(0, our_token.find('.')));

  // Each side takes the other's token.
  std::swap(tokens_[{&etcd(), "alice"}], tokens_[{&ours(), "alice"}]);
  EXPECT_TRUE(GetAs("alice", "/b").ok());
  EXPECT_TRUE(PutAs("alice", "/w/1", "v").ok());
  GetAs("alice", "/c");  // permission denied on both
  GetAs("bad", "/b");    // invalid auth token on both

  // Any change of the auth state makes a JWT token old (a simple token would live on).
  EXPECT_TRUE(Revoke("root", "alice", "writer").ok());
  GetAs("alice", "/b");
  EXPECT_TRUE(Login("alice", "alicepw").ok());
  GetAs("alice", "/b");
  PutAs("alice", "/w/2", "v");

  // Tokens hold no state: they outlive a restart (a simple token would not).
  RestartBoth();
  EXPECT_TRUE(GetAs("alice", "/b").ok());
  Login("alice", "wrong");
}

TEST_F(JwtAuthDiffTest, AMemberWithOnlyThePublicKeyVerifiesButCannotIssue) {
  StartBoth({{"auth-token", Setting(/*with_private_key=*/false)}});
  EXPECT_TRUE(UserAdd("", "root", "rootpw").ok());
  EXPECT_TRUE(RoleAdd("", "root").ok());
  EXPECT_TRUE(Grant("", "root", "root").ok());
  EXPECT_TRUE(Enable("").ok());
  Outcome refused = Login("root", "rootpw");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message.find("verify-only"), std::string::npos) << refused.ToString();
  Login("root", "wrong");
}

}  // namespace
}  // namespace etcdw::testing

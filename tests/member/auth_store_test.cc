// The auth store (member/auth_store.h) claim by claim: etcd's permission arithmetic, its errors,
// its revision, and its records surviving a reload; simple tokens (member/auth_tokens.h) on a
// manual clock.
#include "etcdw/member/auth_store.h"

#include <gtest/gtest.h>

#include "etcdw/common/clock.h"
#include "etcdw/common/etcd_errors.h"
#include "etcdw/member/auth_tokens.h"
#include "etcdw/storage/meta_records.h"

namespace etcdw::member {
namespace {

class AuthStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::EngineOptions o;
    o.in_memory = true;
    engine_ = std::move(storage::Engine::Open("/mem/auth", o)).value();
    ASSERT_TRUE(store_.Load(*engine_).ok());
  }
  // Runs `stage` against a batch and writes it, as the applier does.
  template <typename Fn>
  auto Staged(Fn stage) {
    storage::Batch b(*engine_);
    auto r = stage(b);
    EXPECT_TRUE(engine_->Write(b, false).ok());
    return r;
  }
  void AddUser(const std::string& name, const std::string& hash = "$2a$04$x") {
    etcdserverpb::AuthUserAddRequest r;
    r.set_name(name);
    r.set_hashedpassword(hash);
    ASSERT_TRUE(Staged([&](storage::Batch& b) { return store_.StageUserAdd(b, r); }).ok());
  }
  void AddRole(const std::string& name) {
    ASSERT_TRUE(Staged([&](storage::Batch& b) { return store_.StageRoleAdd(b, name); }).ok());
  }
  void Grant(const std::string& user, const std::string& role) {
    ASSERT_TRUE(
        Staged([&](storage::Batch& b) { return store_.StageUserGrantRole(b, user, role); }).ok());
  }
  void Permit(const std::string& role, authpb::Permission::Type t, const std::string& key,
              const std::string& end) {
    authpb::Permission p;
    p.set_permtype(t);
    p.set_key(key);
    p.set_range_end(end);
    ASSERT_TRUE(Staged([&](storage::Batch& b) {
                  return store_.StageRoleGrantPermission(b, role, p);
                }).ok());
  }
  // root with the root role, and "u" with role "r"; then enabled.
  void EnableWithUser() {
    AddUser("root");
    Grant("root", "root");
    AddUser("u");
    AddRole("r");
    Grant("u", "r");
    ASSERT_TRUE(Staged([&](storage::Batch& b) { return store_.StageEnable(b); }).ok());
  }
  AuthInfo U() const { return AuthInfo{"u", store_.Revision()}; }

  std::unique_ptr<storage::Engine> engine_;
  AuthStore store_;
};

TEST_F(AuthStoreTest, ANewStoreIsDisabledAtRevisionOneAndAllowsEverything) {
  EXPECT_FALSE(store_.Enabled());
  EXPECT_EQ(store_.Revision(), 1u);
  EXPECT_TRUE(store_.CheckRange(AuthInfo{}, "k", "").ok());
  EXPECT_TRUE(store_.CheckAdmin(AuthInfo{}).ok());
}

TEST_F(AuthStoreTest, EnablingNeedsRootWithTheRootRoleAndDoesNotAdvanceTheRevision) {
  auto enable = [&] { return Staged([&](storage::Batch& b) { return store_.StageEnable(b); }); };
  EXPECT_EQ(enable(), errors::RootUserNotExist());
  AddUser("root");
  EXPECT_EQ(store_.Revision(), 2u);
  EXPECT_EQ(enable(), errors::RootRoleNotExist());
  Grant("root", "root");  // the root role need not exist as a role
  EXPECT_EQ(store_.Revision(), 3u);
  EXPECT_TRUE(enable().ok());
  EXPECT_TRUE(store_.Enabled());
  EXPECT_EQ(store_.Revision(), 3u);
  EXPECT_TRUE(enable().ok());  // twice: ignored
  EXPECT_TRUE(Staged([&](storage::Batch& b) { return store_.StageDisable(b); }));
  EXPECT_EQ(store_.Revision(), 4u);
  EXPECT_FALSE(Staged([&](storage::Batch& b) { return store_.StageDisable(b); }));
}

TEST_F(AuthStoreTest, PermissionsCoverRangesAsEtcdsIntervalTreeDoes) {
  EnableWithUser();
  Permit("r", authpb::Permission::READ, "/a/", "/a0");  // the prefix /a/
  Permit("r", authpb::Permission::READ, "/c", "/d");
  Permit("r", authpb::Permission::READ, "/d", "/e");  // adjacent: [/c, /e) without a gap
  Permit("r", authpb::Permission::READ, "/p", "");    // one key
  Permit("r", authpb::Permission::WRITE, "/w", std::string(1, '\0'));  // /w and after
  Permit("r", authpb::Permission::READWRITE, "/rw", "");
  EXPECT_TRUE(store_.CheckRange(U(), "/a/x", "").ok());
  EXPECT_TRUE(store_.CheckRange(U(), "/a/", "/a0").ok());
  EXPECT_TRUE(store_.CheckRange(U(), "/a/b", "/a/c").ok());
  EXPECT_EQ(store_.CheckRange(U(), "/a/", "/a1"), errors::PermissionDenied());
  EXPECT_EQ(store_.CheckRange(U(), "/a", "/a0"), errors::PermissionDenied());
  EXPECT_TRUE(store_.CheckRange(U(), "/c", "/e").ok());
  EXPECT_TRUE(store_.CheckRange(U(), "/cz", "/dz").ok());
  EXPECT_EQ(store_.CheckRange(U(), "/c", "/f"), errors::PermissionDenied());
  EXPECT_TRUE(store_.CheckRange(U(), "/p", "").ok());
  EXPECT_TRUE(store_.CheckRange(U(), "/p", std::string("/p\0", 3)).ok());
  EXPECT_EQ(store_.CheckRange(U(), "/p", "/q"), errors::PermissionDenied());
  EXPECT_EQ(store_.CheckRange(U(), "/pp", ""), errors::PermissionDenied());
  EXPECT_EQ(store_.CheckPut(U(), "/a/x"), errors::PermissionDenied());  // read only
  EXPECT_TRUE(store_.CheckPut(U(), "/zzz").ok());
  EXPECT_TRUE(store_.CheckDeleteRange(U(), "/w", std::string(1, '\0')).ok());
  EXPECT_EQ(store_.CheckDeleteRange(U(), "/v", std::string(1, '\0')), errors::PermissionDenied());
  EXPECT_EQ(store_.CheckRange(U(), "/w", ""), errors::PermissionDenied());  // write only
  EXPECT_TRUE(store_.CheckRange(U(), "/rw", "").ok());
  EXPECT_TRUE(store_.CheckPut(U(), "/rw").ok());
}

TEST_F(AuthStoreTest, CallersAreJudgedByUserRevisionAndRootRole) {
  EnableWithUser();
  const uint64_t rev = store_.Revision();
  EXPECT_EQ(store_.CheckRange(AuthInfo{}, "k", ""), errors::UserEmpty());
  EXPECT_EQ(store_.CheckAdmin(AuthInfo{}), errors::UserEmpty());
  EXPECT_EQ(store_.CheckRange(AuthInfo{"u", rev - 1}, "k", ""), errors::AuthOldRevision());
  EXPECT_EQ(store_.CheckRange(AuthInfo{"ghost", rev}, "k", ""), errors::PermissionDenied());
  EXPECT_EQ(store_.CheckAdmin(AuthInfo{"ghost", rev}), errors::UserNotFound());
  EXPECT_EQ(store_.CheckAdmin(U()), errors::PermissionDenied());
  EXPECT_TRUE(store_.CheckAdmin(AuthInfo{"root", rev}).ok());
  EXPECT_TRUE(store_.CheckRange(AuthInfo{"root", rev}, "", std::string(1, '\0')).ok());
  EXPECT_TRUE(store_.HasRole("u", "r"));
  EXPECT_FALSE(store_.HasRole("u", "root"));
}

TEST_F(AuthStoreTest, ManagementErrorsAreEtcds) {
  EnableWithUser();
  etcdserverpb::AuthUserAddRequest add;
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageUserAdd(b, add); }),
            errors::UserEmpty());
  add.set_name("u");
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageUserAdd(b, add); }),
            errors::UserAlreadyExist());
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageRoleAdd(b, ""); }),
            errors::RoleEmpty());
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageRoleAdd(b, "r"); }),
            errors::RoleAlreadyExist());
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageUserDelete(b, "root"); }),
            errors::InvalidAuthMgmt());
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageRoleDelete(b, "root"); }),
            errors::InvalidAuthMgmt());
  EXPECT_EQ(
      Staged([&](storage::Batch& b) { return store_.StageUserRevokeRole(b, "root", "root"); }),
      errors::InvalidAuthMgmt());
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageUserRevokeRole(b, "u", "x"); }),
            errors::RoleNotGranted());
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageUserGrantRole(b, "u", "x"); }),
            errors::RoleNotFound());
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageUserGrantRole(b, "x", "r"); }),
            errors::UserNotFound());
  EXPECT_EQ(
      Staged([&](storage::Batch& b) { return store_.StageRoleRevokePermission(b, "r", "k", ""); }),
      errors::PermissionNotGranted());
  EXPECT_EQ(Staged([&](storage::Batch& b) { return store_.StageRoleDelete(b, "x"); }),
            errors::RoleNotFound());
  // Deleting a role takes it from its users.
  EXPECT_TRUE(Staged([&](storage::Batch& b) { return store_.StageRoleDelete(b, "r"); }).ok());
  EXPECT_TRUE(store_.UserRoles("u")->empty());
}

TEST_F(AuthStoreTest, TheStateSurvivesAReloadAndDamageIsReported) {
  EnableWithUser();
  Permit("r", authpb::Permission::READWRITE, "/k", "/l");
  AuthStore reloaded;
  ASSERT_TRUE(reloaded.Load(*engine_).ok());
  EXPECT_TRUE(reloaded.Enabled());
  EXPECT_EQ(reloaded.Revision(), store_.Revision());
  EXPECT_EQ(reloaded.UserNames(), (std::vector<std::string>{"root", "u"}));
  EXPECT_TRUE(reloaded.CheckPut(U(), "/k1").ok());
  EXPECT_EQ(reloaded.RolePermissions("r")->size(), 1u);

  storage::Batch b(*engine_);
  b.Put(storage::Column::kMeta, storage::meta::KeyIn(storage::meta::kAuthUsers, "u"), "\xff\xff");
  ASSERT_TRUE(engine_->Write(b, false).ok());
  Status st = reloaded.Load(*engine_);
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_NE(st.message().find("auth/user/u"), std::string::npos) << st.ToString();
}

TEST(SimpleTokensTest, TokensNameTheirEntryAndLiveWhileUsed) {
  common::ManualClock clock;
  SimpleTokens tokens(clock, std::chrono::seconds(300));
  const std::string prefix = SimpleTokens::RandomPrefix();
  ASSERT_EQ(prefix.size(), 16u);
  for (char c : prefix) EXPECT_TRUE(std::isalpha(static_cast<unsigned char>(c))) << prefix;
  EXPECT_NE(SimpleTokens::RandomPrefix(), prefix);
  const std::string t = *tokens.Assign(prefix, 42, "alice", 1);
  EXPECT_EQ(t, prefix + ".42");
  EXPECT_EQ(SimpleTokens::IndexOf(t), 42u);
  EXPECT_FALSE(SimpleTokens::IndexOf("abc"));
  EXPECT_FALSE(SimpleTokens::IndexOf("a.b.1"));
  EXPECT_FALSE(SimpleTokens::IndexOf("a.1x"));
  EXPECT_FALSE(SimpleTokens::IndexOf("a."));

  clock.Advance(std::chrono::seconds(299));
  EXPECT_EQ(tokens.UserOf(t), "alice");  // used: another 300 s
  clock.Advance(std::chrono::seconds(299));
  tokens.Expire();
  EXPECT_EQ(tokens.UserOf(t), "alice");
  clock.Advance(std::chrono::seconds(301));
  tokens.Expire();
  EXPECT_EQ(tokens.Size(), 0u);
  EXPECT_FALSE(tokens.UserOf(t));

  const std::string a = *tokens.Assign("A", 1, "alice", 1);
  const std::string b = *tokens.Assign("B", 2, "bob", 1);
  tokens.InvalidateUser("alice");
  EXPECT_FALSE(tokens.UserOf(a));
  EXPECT_EQ(tokens.UserOf(b), "bob");
  tokens.Clear();
  EXPECT_FALSE(tokens.UserOf(b));
}

}  // namespace
}  // namespace etcdw::member

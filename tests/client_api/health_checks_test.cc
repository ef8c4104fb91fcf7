// etcd's health endpoints' logic (client_api/health_checks.*) against a fake member: alarms, a
// learner, no leader (the linearizable read times out), ?verbose, ?exclude, single checks.
#include "client_api/health_checks.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace etcdw::client_api {
namespace {

class FakeHealthProbe : public HealthProbe {
 public:
  std::vector<etcdserverpb::AlarmType> alarms;
  bool leader = true;
  bool learner = false;
  std::vector<bool> reads;  // the serializable flag of each read asked for
  int healthy = 0, unhealthy = 0;

  std::vector<etcdserverpb::AlarmType> Alarms() override { return alarms; }
  bool HasLeader() override { return leader; }
  bool IsLearner() override { return learner; }
  void Read(bool serializable, std::function<void(Status)> done) override {
    reads.push_back(serializable);
    // Without a leader, a linearizable read fails after the request timeout, as etcd's.
    if (!serializable && !leader) {
      return done(Status(Code::kUnavailable, "etcdserver: request timed out"));
    }
    done(Status::Ok());
  }
  void CountHealth(bool h) override { ++(h ? healthy : unhealthy); }
};

// The fake answers at once, so the answer is there when RunHealthEndpoint returns.
HealthAnswer AskHealth(const std::shared_ptr<FakeHealthProbe>& probe, std::string_view path,
                       std::string_view query = "") {
  HealthAnswer got{-1, "", false};
  RunHealthEndpoint(probe, path, query, [&](HealthAnswer a) { got = std::move(a); });
  return got;
}

TEST(HealthChecksTest, ParseQueryDecodesAsGo) {
  auto q = ParseQuery("verbose&exclude=a%20b&exclude=c+d&&x=%zz&y;z=1&=v");
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(q[0], (std::pair<std::string, std::string>{"verbose", ""}));
  EXPECT_EQ(q[1], (std::pair<std::string, std::string>{"exclude", "a b"}));
  EXPECT_EQ(q[2], (std::pair<std::string, std::string>{"exclude", "c d"}));
  EXPECT_EQ(q[3], (std::pair<std::string, std::string>{"", "v"}));
  EXPECT_TRUE(ParseQuery("").empty());
  EXPECT_TRUE(ParseQuery("a=%4").empty()) << "a cut escape drops the pair";
}

TEST(HealthChecksTest, PathsServedAreEtcd35s) {
  for (auto p :
       {"/health", "/livez", "/readyz", "/livez/serializable_read", "/readyz/data_corruption",
        "/readyz/serializable_read", "/readyz/linearizable_read", "/readyz/non_learner"}) {
    EXPECT_TRUE(IsHealthPath(p)) << p;
  }
  for (auto p : {"/livez/", "/readyz/", "/livez/linearizable_read", "/livez/x", "/healthz",
                 "/readyz/non_learner/"}) {
    EXPECT_FALSE(IsHealthPath(p)) << p;
  }
}

TEST(HealthChecksTest, HealthyMemberAnswersOkAndVerboseListsEveryCheck) {
  auto probe = std::make_shared<FakeHealthProbe>();
  HealthAnswer a = AskHealth(probe, "/livez");
  EXPECT_EQ(a.code, 200);
  EXPECT_EQ(a.body, "ok\n");
  EXPECT_TRUE(a.plain);
  EXPECT_EQ(probe->reads, std::vector<bool>{true}) << "/livez reads serializably only";
  a = AskHealth(probe, "/readyz", "verbose");
  EXPECT_EQ(a.code, 200);
  EXPECT_EQ(a.body,
            "[+]data_corruption ok\n[+]serializable_read ok\n[+]linearizable_read ok\n"
            "[+]non_learner ok\nok\n");
  a = AskHealth(probe, "/readyz", "verbose=false&exclude=serializable_read&exclude=nonexistent");
  EXPECT_EQ(a.body, "[+]data_corruption ok\n[+]linearizable_read ok\n[+]non_learner ok\nok\n")
      << "any value of verbose counts; an unknown exclusion is ignored";
  a = AskHealth(probe, "/livez/serializable_read", "verbose&exclude=serializable_read");
  EXPECT_EQ(a.body, "[+]serializable_read ok\nok\n") << "a single check ignores exclude";
}

TEST(HealthChecksTest, CorruptAlarmFailsReadyzButNotLivez) {
  auto probe = std::make_shared<FakeHealthProbe>();
  probe->alarms = {etcdserverpb::CORRUPT};
  HealthAnswer a = AskHealth(probe, "/readyz");
  EXPECT_EQ(a.code, 503);
  EXPECT_EQ(a.body,
            "[-]data_corruption failed: alarm activated: CORRUPT\n[+]serializable_read ok\n"
            "[+]linearizable_read ok\n[+]non_learner ok\n\n")
      << "a failure always lists the checks; http.Error adds a newline";
  EXPECT_EQ(AskHealth(probe, "/readyz", "exclude=data_corruption").code, 200);
  EXPECT_EQ(AskHealth(probe, "/readyz/data_corruption").body,
            "[-]data_corruption failed: alarm activated: CORRUPT\n\n");
  EXPECT_EQ(AskHealth(probe, "/livez").code, 200);
  // NOSPACE is no data corruption.
  probe->alarms = {etcdserverpb::NOSPACE};
  EXPECT_EQ(AskHealth(probe, "/readyz").code, 200);
}

TEST(HealthChecksTest, NoLeaderFailsTheLinearizableReadOnly) {
  auto probe = std::make_shared<FakeHealthProbe>();
  probe->leader = false;
  HealthAnswer a = AskHealth(probe, "/readyz");
  EXPECT_EQ(a.code, 503);
  EXPECT_EQ(a.body,
            "[+]data_corruption ok\n[+]serializable_read ok\n"
            "[-]linearizable_read failed: etcdserver: request timed out\n[+]non_learner ok\n\n");
  EXPECT_EQ(AskHealth(probe, "/livez").code, 200) << "the process itself is alive";
  EXPECT_EQ(AskHealth(probe, "/readyz", "exclude=linearizable_read").code, 200);
}

TEST(HealthChecksTest, LearnerIsNotReady) {
  auto probe = std::make_shared<FakeHealthProbe>();
  probe->learner = true;
  HealthAnswer a = AskHealth(probe, "/readyz/non_learner", "verbose");
  EXPECT_EQ(a.code, 503);
  EXPECT_EQ(a.body, "[-]non_learner failed: not supported for learner\n\n");
  EXPECT_EQ(AskHealth(probe, "/livez").code, 200);
}

TEST(HealthChecksTest, HealthKeepsEtcd34sBodyWithExcludeAndSerializable) {
  auto probe = std::make_shared<FakeHealthProbe>();
  HealthAnswer a = AskHealth(probe, "/health");
  EXPECT_EQ(a.code, 200);
  EXPECT_EQ(a.body, R"({"health":"true"})");
  EXPECT_FALSE(a.plain) << "Go sniffs the 200's type";
  EXPECT_EQ(probe->reads, std::vector<bool>{false}) << "a linearizable read by default";

  probe->alarms = {etcdserverpb::NOSPACE};
  a = AskHealth(probe, "/health");
  EXPECT_EQ(a.code, 503);
  EXPECT_EQ(a.body, "{\"health\":\"false\"}\n");
  EXPECT_TRUE(a.plain);
  EXPECT_EQ(AskHealth(probe, "/health", "exclude=NOSPACE").code, 200);
  EXPECT_EQ(AskHealth(probe, "/health", "exclude=CORRUPT").code, 503);
  probe->alarms.clear();

  probe->leader = false;
  probe->reads.clear();
  EXPECT_EQ(AskHealth(probe, "/health").code, 503);
  EXPECT_TRUE(probe->reads.empty()) << "no read without a leader";
  EXPECT_EQ(AskHealth(probe, "/health", "serializable=true").code, 200);
  EXPECT_EQ(probe->reads, std::vector<bool>{true});
  EXPECT_EQ(AskHealth(probe, "/health", "serializable=1").code, 503) << "only \"true\" counts";
  EXPECT_EQ(probe->healthy, 3);
  EXPECT_EQ(probe->unhealthy, 4);
}

}  // namespace
}  // namespace etcdw::client_api

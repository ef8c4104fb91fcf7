// The fault campaign (fault_campaign.h) in CI: three fixed seeds of a few cycles each, two with 3
// members and one with 5. Long runs:
// ETCDW_CAMPAIGN_SEED, ETCDW_CAMPAIGN_CYCLES and ETCDW_CAMPAIGN_MEMBERS (3 or 5) select a seed,
// a number of cycles and a cluster size for FaultCampaignLongTest, skipped without the first
// two; ETCDW_CAMPAIGN_KINDS="full-disk,promote-learner" draws only those faults
// (docs/testing.md).
#include "e2e/fault_campaign.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace etcdw::testing {
namespace {

// About 30 s a seed (3 s a cycle) on a loaded 2-core machine.
constexpr int kCiCycles = 10;

// A seed and a cluster size.
struct CampaignCase {
  uint64_t seed;
  int members;
};

class FaultCampaignTest : public ::testing::TestWithParam<CampaignCase> {};

TEST_P(FaultCampaignTest, FaultsKeepHistoriesLinearizableAndWritesAndWatchesWhole) {
  CampaignOptions o;
  o.seed = GetParam().seed;
  o.members = GetParam().members;
  o.cycles = kCiCycles;
  CampaignResult r = RunCampaign(o);
  std::cout << r.summary << "\n" << r.executed << std::flush;
  EXPECT_TRUE(r.passed) << r.failure;
}

INSTANTIATE_TEST_SUITE_P(Seeds, FaultCampaignTest,
                         ::testing::Values(CampaignCase{1, 3}, CampaignCase{2, 3},
                                           CampaignCase{3, 5}),
                         [](const ::testing::TestParamInfo<CampaignCase>& info) {
                           return "seed" + std::to_string(info.param.seed) + "_" +
                                  std::to_string(info.param.members) + "members";
                         });

// The campaign catches a broken build: members that serve linearizable reads from their own
// store (ETCDW_TEST_UNSAFE_LOCAL_READS) let a client read a value older than one another client
// already saw acknowledged. The faults are those that leave a member behind while others go on
// (a paused or cut-off leader), so that the seed's few cycles surely give it the chance.
TEST(FaultCampaignBrokenBuildTest, CatchesLinearizableReadsServedWithoutReadIndex) {
  setenv("ETCDW_TEST_UNSAFE_LOCAL_READS", "1", 1);  // inherited by the members
  CampaignOptions o;
  o.seed = 1;
  o.cycles = 4;
  o.kinds = {FaultKind::kPauseLeader, FaultKind::kIsolateLeader};
  CampaignResult r = RunCampaign(o);
  unsetenv("ETCDW_TEST_UNSAFE_LOCAL_READS");
  std::cout << r.summary << std::endl;
  EXPECT_FALSE(r.passed) << "stale reads went unnoticed";
  EXPECT_NE(r.failure.find("NOT linearizable"), std::string::npos) << r.failure.substr(0, 2000);
}

// The variable's value as an unsigned number; `fallback` when it is unset.
uint64_t CampaignEnv(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 10) : fallback;
}

// The faults ETCDW_CAMPAIGN_KINDS names (comma-separated FaultName()s); all when unset.
std::vector<FaultKind> CampaignKinds() {
  std::vector<FaultKind> kinds;
  const char* v = std::getenv("ETCDW_CAMPAIGN_KINDS");
  std::stringstream names(v != nullptr ? v : "");
  for (std::string name; std::getline(names, name, ',');) {
    bool known = false;
    for (int k = 0; k < kFaultKinds; ++k) {
      if (name == FaultName(static_cast<FaultKind>(k))) {
        kinds.push_back(static_cast<FaultKind>(k));
        known = true;
      }
    }
    if (!known) ADD_FAILURE() << "ETCDW_CAMPAIGN_KINDS names no fault \"" << name << "\"";
  }
  return kinds;
}

TEST(FaultCampaignLongTest, RunsTheSeedAndCyclesOfTheEnvironment) {
  if (std::getenv("ETCDW_CAMPAIGN_SEED") == nullptr &&
      std::getenv("ETCDW_CAMPAIGN_CYCLES") == nullptr) {
    GTEST_SKIP() << "set ETCDW_CAMPAIGN_SEED and/or ETCDW_CAMPAIGN_CYCLES to run it";
  }
  CampaignOptions o;
  o.seed = CampaignEnv("ETCDW_CAMPAIGN_SEED", std::random_device{}());
  o.cycles = static_cast<int>(CampaignEnv("ETCDW_CAMPAIGN_CYCLES", kCiCycles));
  o.members = static_cast<int>(CampaignEnv("ETCDW_CAMPAIGN_MEMBERS", 3));
  o.kinds = CampaignKinds();
  std::cout << "[ CAMPAIGN ] seed " << o.seed << ", " << o.members << " members, " << o.cycles
            << " cycles (replay with ETCDW_CAMPAIGN_SEED=" << o.seed << ")" << std::endl;
  CampaignResult r = RunCampaign(o);
  std::cout << r.summary << "\n" << r.executed << std::flush;
  EXPECT_TRUE(r.passed) << r.failure;
}

}  // namespace
}  // namespace etcdw::testing

// The fault campaign (fault_campaign.h) in CI: three fixed seeds of a few cycles each. Long runs:
// ETCDW_CAMPAIGN_SEED and ETCDW_CAMPAIGN_CYCLES select a seed and a number of cycles for
// FaultCampaignLongTest, skipped without them (docs/testing.md).
#include "e2e/fault_campaign.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

namespace etcdw::testing {
namespace {

// About 30 s a seed (3 s a cycle) on a loaded 2-core machine.
constexpr int kCiCycles = 10;

class FaultCampaignTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FaultCampaignTest, KillsAndPausesKeepHistoriesLinearizableAndWritesAndWatchesWhole) {
  CampaignOptions o;
  o.seed = GetParam();
  o.cycles = kCiCycles;
  CampaignResult r = RunCampaign(o);
  std::cout << r.summary << std::endl;
  EXPECT_TRUE(r.passed) << r.failure;
}

INSTANTIATE_TEST_SUITE_P(Seeds, FaultCampaignTest, ::testing::Values(1, 2, 3));

// The campaign catches a broken build: members that serve linearizable reads from their own
// store (ETCDW_TEST_UNSAFE_LOCAL_READS) let a client read a value older than one another client
// already saw acknowledged.
TEST(FaultCampaignBrokenBuildTest, CatchesLinearizableReadsServedWithoutReadIndex) {
  setenv("ETCDW_TEST_UNSAFE_LOCAL_READS", "1", 1);  // inherited by the members
  CampaignOptions o;
  o.seed = 1;
  o.cycles = 4;
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

TEST(FaultCampaignLongTest, RunsTheSeedAndCyclesOfTheEnvironment) {
  if (std::getenv("ETCDW_CAMPAIGN_SEED") == nullptr &&
      std::getenv("ETCDW_CAMPAIGN_CYCLES") == nullptr) {
    GTEST_SKIP() << "set ETCDW_CAMPAIGN_SEED and/or ETCDW_CAMPAIGN_CYCLES to run it";
  }
  CampaignOptions o;
  o.seed = CampaignEnv("ETCDW_CAMPAIGN_SEED", std::random_device{}());
  o.cycles = static_cast<int>(CampaignEnv("ETCDW_CAMPAIGN_CYCLES", kCiCycles));
  std::cout << "[ CAMPAIGN ] seed " << o.seed << ", " << o.cycles
            << " cycles (replay with ETCDW_CAMPAIGN_SEED=" << o.seed << ")" << std::endl;
  CampaignResult r = RunCampaign(o);
  std::cout << r.summary << std::endl;
  EXPECT_TRUE(r.passed) << r.failure;
}

}  // namespace
}  // namespace etcdw::testing

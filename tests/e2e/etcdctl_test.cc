// End-to-end tests: etcdctl 3.4 against etcd-wrapper.
#include <gtest/gtest.h>

#include "servers.h"

namespace etcdw::testing {
namespace {

class EtcdctlTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(member_.Start()) << member_.log(); }
  // Runs etcdctl against the member; returns its exit status and output.
  int Ctl(const std::vector<std::string>& args, std::string* out, const std::string& input = "") {
    std::vector<std::string> argv = {"etcdctl", "--endpoints=" + member_.endpoint()};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, out, std::chrono::seconds(30), input);
  }
  Member member_{Member::Kind::kEtcdWrapper};
};

TEST_F(EtcdctlTest, PutGetDelete) {
  std::string out;
  ASSERT_EQ(Ctl({"put", "foo", "bar"}, &out), 0) << out;
  EXPECT_EQ(out, "OK\n");
  ASSERT_EQ(Ctl({"get", "foo"}, &out), 0) << out;
  EXPECT_EQ(out, "foo\nbar\n");
  ASSERT_EQ(Ctl({"del", "foo"}, &out), 0) << out;
  EXPECT_EQ(out, "1\n");
}

}  // namespace
}  // namespace etcdw::testing

// The sidecar's validation of a data directory etcd 3.4 left (killed during writes: the
// takeover fixture, tests/data_dir/testdata): valid in both modes, so the initialisation neither
// restores nor removes it, and not one of etcd's files changes; the member takes it over at its
// start.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "etcdw/common/hash.h"
#include "etcdw/sidecar/initializer.h"
#include "etcdw/sidecar/validator.h"
#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

namespace fs = std::filesystem;

std::map<std::string, std::string> Digests(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    common::Sha256 sha;
    sha.Update(testsupport::ReadFile(e.path().string()));
    auto d = sha.Final();
    out[fs::relative(e.path(), dir).string()] = std::string(d.begin(), d.end());
  }
  return out;
}

TEST(ValidatorEtcdTest, AnEtcdDataDirectoryIsValidAndLeftAsItIs) {
  ::unsetenv("POD_NAMESPACE");  // no safe-guard file written beside the directory
  testsupport::ScratchDir scratch("validator-etcd");
  ASSERT_FALSE(scratch.path().empty());
  const std::string cmd = "tar -xzf '" + std::string(ETCDW_SOURCE_DIR) +
                          "/tests/data_dir/testdata/etcd34_datadir_killed.tar.gz' -C '" +
                          scratch.path() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string dir = scratch.path() + "/etcd";
  const auto before = Digests(dir);
  ASSERT_TRUE(before.count("member/snap/db"));

  for (ValidationMode mode : {ValidationMode::kSanity, ValidationMode::kFull}) {
    Validation v = ValidateDataDir(dir, mode, nullptr, 1);
    EXPECT_EQ(v.status, DataDirStatus::kValid) << v.detail;
  }
  ServerOptions o;
  o.restoration.data_dir = dir;
  InitializerContext ctx;
  ctx.options = &o;
  ctx.member_name = "fixture";
  Status st = Initialize(ctx, ValidationMode::kFull);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Digests(dir), before);
}

}  // namespace
}  // namespace etcdw::sidecar

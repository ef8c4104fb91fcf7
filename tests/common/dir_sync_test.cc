#include "etcdw/common/dir_sync.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "support/scratch_dir.h"

namespace etcdw::common {
namespace {

TEST(SyncDirectoryTest, SyncsAnExistingDirectory) {
  testsupport::ScratchDir dir("dir-sync");
  EXPECT_TRUE(SyncDirectory(dir.path()).ok());
  EXPECT_TRUE(SyncDirectory("").ok());  // the current directory
}

TEST(SyncDirectoryTest, AMissingDirectoryIsAnErrorNamingIt) {
  testsupport::ScratchDir dir("dir-sync");
  Status st = SyncDirectory(dir.path() + "/missing");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find(dir.path() + "/missing"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("No such file or directory"), std::string::npos) << st.message();
}

TEST(SyncDirectoryTest, AFileIsNotADirectory) {
  testsupport::ScratchDir dir("dir-sync");
  const std::string file = dir.path() + "/f";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
  }
  Status st = SyncDirectory(file);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("Not a directory"), std::string::npos) << st.message();
}

TEST(SyncParentDirectoryTest, SyncsTheDirectoryHoldingThePath) {
  testsupport::ScratchDir dir("dir-sync");
  EXPECT_TRUE(SyncParentDirectory(dir.path() + "/not-yet-created").ok());
  EXPECT_TRUE(SyncParentDirectory("relative-name").ok());  // its parent: the current directory
  Status st = SyncParentDirectory(dir.path() + "/missing/child");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(dir.path() + "/missing"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace etcdw::common

// The sidecar's local file helpers (src/sidecar/file_util.h).
#include "file_util.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

namespace fs = std::filesystem;

class FileUtilTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }
  testsupport::ScratchDir dir_{"file-util"};
};

TEST(JoinPathTest, OneSlashBetweenDirAndName) {
  EXPECT_EQ(JoinPath("/tmp", "db"), "/tmp/db");
  EXPECT_EQ(JoinPath("/tmp/", "db"), "/tmp/db");
  EXPECT_EQ(JoinPath("rel", "db"), "rel/db");
  EXPECT_EQ(JoinPath("", "db"), "db");
}

TEST(ErrnoErrorTest, IsInternalWithTheSystemsWords) {
  Status st = ErrnoError("open \"x\"", ENOENT);
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_EQ(st.message(), std::string("open \"x\": ") + std::strerror(ENOENT));
}

TEST_F(FileUtilTest, WriteFileCreatesPrivateAndReplacesWhole) {
  const std::string path = Path("payload");
  ASSERT_TRUE(WriteFile(path, std::string("long content\0with a zero", 24)).ok());
  EXPECT_EQ(testsupport::ReadFile(path), std::string("long content\0with a zero", 24));
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // A shorter write leaves nothing of the old content.
  ASSERT_TRUE(WriteFile(path, "short").ok());
  EXPECT_EQ(testsupport::ReadFile(path), "short");
  ASSERT_TRUE(WriteFile(path, "").ok());
  EXPECT_EQ(fs::file_size(path), 0u);
}

TEST_F(FileUtilTest, WriteFileIntoAMissingDirectoryNamesThePath) {
  const std::string path = Path("no/such/dir/file");
  Status st = WriteFile(path, "x");
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
}

TEST_F(FileUtilTest, ReadExactlyReadsAtTheOffsetAndRefusesAShortFile) {
  const std::string path = Path("data");
  ASSERT_TRUE(WriteFile(path, "0123456789").ok());
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  char buf[8] = {};
  ASSERT_TRUE(ReadExactly(fd, buf, 4, path).ok());
  EXPECT_EQ(std::string(buf, 4), "0123");
  ASSERT_TRUE(ReadExactly(fd, buf, 3, path).ok());  // goes on from where it stopped
  EXPECT_EQ(std::string(buf, 3), "456");
  Status st = ReadExactly(fd, buf, 8, path);  // 3 bytes left
  EXPECT_EQ(st.code(), Code::kDataLoss);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  ::close(fd);

  st = ReadExactly(-1, buf, 1, path);
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
}

TEST_F(FileUtilTest, TempFilesRemovesWhatWasAddedWhenItEnds) {
  const std::string kept = Path("kept");
  ASSERT_TRUE(WriteFile(kept, "k").ok());
  {
    TempFiles temps;
    const std::string& first = temps.Add(Path("first"));
    ASSERT_TRUE(WriteFile(first, "1").ok());
    // Many more: the first reference stays valid.
    for (int i = 0; i < 100; ++i) temps.Add(Path("t" + std::to_string(i)));
    ASSERT_TRUE(WriteFile(Path("t7"), "7").ok());
    temps.Add(Path("never-created"));  // nothing to remove: no error
    EXPECT_EQ(first, Path("first"));
    EXPECT_TRUE(fs::exists(first));
  }
  EXPECT_FALSE(fs::exists(Path("first")));
  EXPECT_FALSE(fs::exists(Path("t7")));
  EXPECT_TRUE(fs::exists(kept));
}

}  // namespace
}  // namespace etcdw::sidecar

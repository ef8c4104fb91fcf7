#include "etcdw/wrapper/exit_code.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/files.h"
#include "support/scratch_dir.h"

namespace etcdw::wrapper {
namespace {

class ExitCodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("exit");
    dir_ = scratch_->path();
    ASSERT_FALSE(scratch_->path().empty());
    file_ = dir_ + "/exit_code";
  }
  void TearDown() override { scratch_.reset(); }
  void Write(const std::string& content) { ASSERT_TRUE(testsupport::WriteFile(file_, content)); }
  std::string Read() { return testsupport::ReadFile(file_); }
  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  std::string dir_, file_;
};

TEST_F(ExitCodeTest, MissingFileMeansFull) {
  EXPECT_EQ(ChooseValidationMode(file_), ValidationMode::kFull);
}

TEST_F(ExitCodeTest, RecordedSignalsMeanSanityWhitespaceIgnored) {
  for (const char* content : {"terminated", "interrupt", "  terminated\n", "\tinterrupt \r\n"}) {
    Write(content);
    EXPECT_EQ(ChooseValidationMode(file_), ValidationMode::kSanity) << content;
  }
}

TEST_F(ExitCodeTest, AnythingElseMeansFull) {
  for (const char* content : {"", "killed", "Terminated", "terminatedx", "0", "inter rupt"}) {
    Write(content);
    EXPECT_EQ(ChooseValidationMode(file_), ValidationMode::kFull) << content;
  }
  // Unreadable: a directory in its place.
  std::filesystem::remove(file_);
  std::filesystem::create_directory(file_);
  EXPECT_EQ(ChooseValidationMode(file_), ValidationMode::kFull);
}

TEST_F(ExitCodeTest, LegacyMarkerIsRemoved) {
  std::ofstream(dir_ + "/validation_marker") << "x";
  ChooseValidationMode(file_);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/validation_marker"));
}

TEST_F(ExitCodeTest, CaptureWritesTheNameOwnerOnlyAndRemoveDeletes) {
  Write("an older and longer content");
  ::chmod(file_.c_str(), 0644);
  CaptureExitSignal(file_, "terminated");
  EXPECT_EQ(Read(), "terminated");
  struct stat st {};
  ASSERT_EQ(::stat(file_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ChooseValidationMode(file_), ValidationMode::kSanity);
  RemoveExitCodeFile(file_);
  EXPECT_FALSE(std::filesystem::exists(file_));
  RemoveExitCodeFile(file_);  // missing is fine
  // A directory that does not exist: logged, nothing thrown.
  CaptureExitSignal(dir_ + "/no/such/dir/exit_code", "interrupt");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/no"));
}

}  // namespace
}  // namespace etcdw::wrapper

// etcd-druid's copy job end to end: the real `etcdbrctl copy` with the arguments druid's
// EtcdCopyBackupsTask reconciler gives it moves a pod's backups (Local store, or S3 on an
// s3rver through ABS on Azurite) to another store, from which a fresh pod restores exactly what was
// backed up; and a copy killed half-way (kill -9, its uploads slowed by a preloaded library)
// completes when it is run again.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "azurite.h"
#include "pod.h"

namespace etcdw::testing {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

// Every file under `dir` (recursively) by its path relative to `dir`, with its contents.
std::map<std::string, std::string> FilesUnder(const std::string& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    out[e.path().lexically_relative(dir).string()] = ReadFile(e.path().string());
  }
  return out;
}

// `etcdbrctl copy` as druid's job runs it, into the Local store "backups" under `home`, with
// the source given by `source_args` and `env`; returns the exit status.
int RunCopyJob(const std::string& home, const std::string& temp_dir,
               const std::vector<std::string>& source_args, const std::vector<std::string>& env,
               std::string* log) {
  std::vector<std::string> argv = {"env", "HOME=" + home};
  argv.insert(argv.end(), env.begin(), env.end());
  for (const std::string& a :
       {EtcdbrctlBinary(), std::string("copy"), "--snapstore-temp-directory=" + temp_dir,
        std::string("--storage-provider=Local"), std::string("--store-prefix=etcd-main"),
        std::string("--store-container=backups")}) {
    argv.push_back(a);
  }
  argv.insert(argv.end(), source_args.begin(), source_args.end());
  argv.push_back("--max-backup-age=7");
  argv.push_back("--max-backups-to-copy=3");
  argv.push_back("--wait-for-final-snapshot=false");
  return RunCommand(argv, log, 60s);
}

// The source pod is stopped; a pod whose store is the copy's target and whose data directory
// is empty must serve exactly what the source backed up.
void CheckTheCopyRestores(Pod& source, const Dump& before, Pod& target) {
  source.wrapper().Kill();
  source.sidecar().Kill();
  ASSERT_TRUE(target.StartSidecar());
  ASSERT_TRUE(target.StartWrapper());
  ASSERT_TRUE(target.WaitReady()) << target.Logs();
  EXPECT_TRUE(Contains(target.SidecarLog(), "restoring the data directory from the backup"))
      << target.Logs();
  EXPECT_EQ(DumpAll(target.Endpoint()), before) << target.Logs();
}

TEST(CopyJobTest, DruidsCopyJobMovesBackupsBetweenLocalStoresAndAPodRestoresFromThem) {
  Pod source;
  const Dump before = WriteAndBackUp(source);
  Pod target;
  std::string log;
  const int rc = RunCopyJob(target.File("home"), target.File("job/tmp"),
                            {"--source-storage-provider=Local", "--source-store-prefix=etcd-main"},
                            {"SOURCE_STORAGE_CONTAINER=" + source.File("home/backups")}, &log);
  ASSERT_EQ(rc, 0) << log;
  // Byte for byte, every object of the source (a full snapshot and a delta).
  const auto copied = FilesUnder(target.Backups());
  EXPECT_EQ(copied, FilesUnder(source.Backups())) << log;
  EXPECT_EQ(copied.size(), 2u) << log;
  EXPECT_TRUE(fs::is_empty(target.File("job/tmp"))) << "the job left its downloads";
  // Run again: nothing to copy.
  ASSERT_EQ(RunCopyJob(target.File("home"), target.File("job/tmp"),
                       {"--source-storage-provider=Local", "--source-store-prefix=etcd-main",
                        "--source-store-container=" + source.File("home/backups")},
                       {}, &log),
            0)
      << log;
  EXPECT_EQ(LogsWithMsg(log, "skipping a snapshot the destination has").size(), 2u) << log;
  EXPECT_TRUE(LogsWithMsg(log, "copying a snapshot").empty()) << log;
  CheckTheCopyRestores(source, before, target);
}

// S3 (s3rver) to ABS (Azurite), then ABS to Local: both stores as source and destination of
// druid's job with their credentials from files; a pod restores from the end of the chain
// exactly what the first store held.
TEST(CopyJobTest, DruidsCopyJobMovesBackupsFromS3ToAbsAndOnAndAPodRestoresFromThem) {
  S3rver s3;
  ASSERT_TRUE(s3.Start({"etcd-backups"})) << s3.log();
  Azurite azurite;
  ASSERT_TRUE(azurite.Start()) << azurite.log();
  ASSERT_TRUE(azurite.CreateContainer("moved-backups")) << azurite.log();
  Pod source(&s3);
  const Dump before = WriteAndBackUp(source);
  Pod target;
  const std::string azure_json = target.File("azure.json");
  WriteFile(azure_json, std::string(R"({"storageAccount": ")") + Azurite::kAccount +
                            R"(", "storageKey": ")" + Azurite::kKey + "\"}");

  std::string log;
  std::vector<std::string> to_abs = {
      "env",
      "HOME=" + target.File("home"),
      "SOURCE_AWS_APPLICATION_CREDENTIALS_JSON=" + source.File("s3.json"),
      "AZURE_APPLICATION_CREDENTIALS_JSON=" + azure_json,
      EtcdbrctlBinary(),
      "copy",
      "--snapstore-temp-directory=" + target.File("job/tmp"),
      "--storage-provider=ABS",
      "--store-prefix=shoot--dev--moved/etcd-main",
      "--store-container=moved-backups",
      "--store-endpoint-override=" + azurite.endpoint(),
      "--source-storage-provider=S3",
      "--source-store-prefix=etcd-main",
      "--source-store-container=etcd-backups"};
  ASSERT_EQ(RunCommand(to_abs, &log, 60s), 0) << log << azurite.log();
  EXPECT_EQ(LogsWithMsg(log, "copied a snapshot").size(), 2u) << log;

  const int rc = RunCopyJob(
      target.File("home"), target.File("job/tmp"),
      {"--source-storage-provider=ABS", "--source-store-prefix=shoot--dev--moved/etcd-main",
       "--source-store-endpoint-override=" + azurite.endpoint()},
      {"SOURCE_STORAGE_CONTAINER=moved-backups",
       "SOURCE_AZURE_APPLICATION_CREDENTIALS_JSON=" + azure_json},
      &log);
  ASSERT_EQ(rc, 0) << log << azurite.log();
  const auto copied = FilesUnder(target.Backups());
  ASSERT_EQ(copied.size(), 2u) << log;
  for (const auto& [name, bytes] : copied) {
    const std::string object = s3.data_dir() + "/etcd-backups/etcd-main/v2/" + name;
    EXPECT_EQ(ReadFile(object + "._S3rver_object"), bytes) << name;
  }
  CheckTheCopyRestores(source, before, target);
}

// The source: a full snapshot and `deltas` deltas of `size` bytes each, written into a Local
// store's directory as the snapshotter names them.
std::map<std::string, std::string> WriteBackupFiles(const std::string& v2_dir, int deltas,
                                                    size_t size) {
  fs::create_directories(v2_dir);
  std::map<std::string, std::string> files;
  for (int i = 0; i <= deltas; ++i) {
    char name[96];
    if (i == 0) {
      std::snprintf(name, sizeof name, "Full-00000000-00000100-1700000000.gz");
    } else {
      std::snprintf(name, sizeof name, "Incr-%08d-%08d-%d.gz", 100 + 10 * i - 9, 100 + 10 * i,
                    1700000000 + 60 * i);
    }
    std::string data(size, '\0');
    for (size_t b = 0; b < size; ++b) data[b] = static_cast<char>((b * 131 + i * 17) & 0xff);
    WriteFile(v2_dir + "/" + name, data);
    files[name] = data;
  }
  return files;
}

// Snapshot objects (not the Local store's temporary files) under `dir`.
std::map<std::string, std::string> SnapshotFilesUnder(const std::string& dir) {
  auto files = FilesUnder(dir);
  for (auto it = files.begin(); it != files.end();) {
    it = it->first.front() == '.' ? files.erase(it) : std::next(it);
  }
  return files;
}

TEST(CopyJobTest, ACopyKilledHalfWayCompletesWhenRunAgain) {
  TempDir dir;
  const std::string home = dir.File("home");
  const auto source = WriteBackupFiles(dir.File("source/etcd-main/v2"), 20, 256 << 10);
  const std::string target = home + "/backups/etcd-main/v2";
  const std::string control = dir.File("sync_control");
  WriteFile(control, "150");  // every fsync of the copy takes 150 ms
  std::vector<std::string> argv = {EtcdbrctlBinary(),
                                   "copy",
                                   "--snapstore-temp-directory=" + dir.File("tmp"),
                                   "--storage-provider=Local",
                                   "--store-prefix=etcd-main",
                                   "--store-container=backups",
                                   "--source-store-container=" + dir.File("source"),
                                   "--max-parallel-copy-operations=2"};
  Process copy;
  ASSERT_TRUE(copy.Start(argv, dir.File("copy.log"),
                         {"HOME=" + home, std::string("LD_PRELOAD=") + ETCDW_SLOW_FSYNC_LIB,
                          "ETCDW_SLOW_FSYNC_FILE=" + control}));
  ASSERT_TRUE(WaitUntil([&] { return SnapshotFilesUnder(target).size() >= 4; }, 30s))
      << ReadFile(dir.File("copy.log"));
  copy.Kill();
  const auto partial = SnapshotFilesUnder(target);
  ASSERT_LT(partial.size(), source.size()) << "the copy finished before it was killed";
  // What the killed copy left under snapshot names is complete.
  for (const auto& [name, bytes] : partial) EXPECT_EQ(bytes, source.at(name)) << name;

  std::string log;
  std::vector<std::string> rerun = {"env", "HOME=" + home};
  rerun.insert(rerun.end(), argv.begin(), argv.end());
  ASSERT_EQ(RunCommand(rerun, &log, 60s), 0) << log;
  EXPECT_EQ(SnapshotFilesUnder(target), source) << log;
  EXPECT_EQ(LogsWithMsg(log, "skipping a snapshot the destination has").size(), partial.size())
      << log;
  // The killed copy's downloads went with its directory when the rerun started.
  EXPECT_EQ(LogsWithMsg(log, "removed the directory of a copy that did not finish").size(), 1u)
      << log;
  EXPECT_TRUE(fs::is_empty(dir.File("tmp"))) << log;
}

}  // namespace
}  // namespace etcdw::testing

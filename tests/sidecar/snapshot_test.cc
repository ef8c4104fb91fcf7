#include "etcdw/sidecar/snapshot.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/clock_util.h"

namespace etcdw::sidecar {
namespace {

using std::chrono::system_clock;

using testsupport::Unix;

SnapshotInfo Parsed(const std::string& key) {
  Result<SnapshotInfo> r = ParseSnapshotKey(key);
  EXPECT_TRUE(r.ok()) << key << ": " << r.status().ToString();
  return r.ok() ? r.value() : SnapshotInfo{};
}

TEST(SnapshotNameTest, PadsRevisionsToEightDigits) {
  EXPECT_EQ(MakeSnapshotName(SnapshotKind::kFull, 0, 9002, Unix(1565021494), ".gz", false),
            "Full-00000000-00009002-1565021494.gz");
  EXPECT_EQ(MakeSnapshotName(SnapshotKind::kIncr, 9003, 9010, Unix(1565021514), "", false),
            "Incr-00009003-00009010-1565021514");
}

TEST(SnapshotNameTest, RevisionsBeyondEightDigitsPrintInFull) {
  EXPECT_EQ(MakeSnapshotName(SnapshotKind::kIncr, 123456789, 12345678901, Unix(1700000000), ".zlib",
                             false),
            "Incr-123456789-12345678901-1700000000.zlib");
}

TEST(SnapshotNameTest, EverySuffixAndFinal) {
  const auto t = Unix(1700000000);
  EXPECT_EQ(MakeSnapshotName(SnapshotKind::kFull, 0, 12000, t, ".gz", true),
            "Full-00000000-00012000-1700000000.gz.final");
  EXPECT_EQ(MakeSnapshotName(SnapshotKind::kFull, 0, 12000, t, "", true),
            "Full-00000000-00012000-1700000000.final");
  EXPECT_EQ(MakeSnapshotName(SnapshotKind::kFull, 0, 12000, t, ".Z", false),
            "Full-00000000-00012000-1700000000.Z");
  EXPECT_EQ(MakeSnapshotName(SnapshotKind::kFull, 0, 12000, t, ".zlib", true),
            "Full-00000000-00012000-1700000000.zlib.final");
}

TEST(SnapshotNameTest, NameUsesWholeSecondsOfCreationTime) {
  auto t = Unix(1700000000) + std::chrono::nanoseconds(999999999);
  SnapshotInfo s = NewSnapshot(SnapshotKind::kIncr, 5, 9, t, ".gz", false);
  EXPECT_EQ(s.snap_name, "Incr-00000005-00000009-1700000000.gz");
  EXPECT_EQ(s.created_on, t);  // nanoseconds kept in the descriptor
  EXPECT_EQ(s.kind, SnapshotKind::kIncr);
  EXPECT_EQ(s.start_revision, 5);
  EXPECT_EQ(s.last_revision, 9);
  EXPECT_EQ(s.compression_suffix, ".gz");
  EXPECT_FALSE(s.is_final);
  EXPECT_FALSE(s.is_chunk);
  EXPECT_EQ(s.prefix, "");
  EXPECT_EQ(s.snap_dir, "");
}

TEST(ParseSnapshotKeyTest, V2KeyWithEverySuffix) {
  struct Case {
    const char* suffix;
    const char* compression;
    bool final;
  };
  for (const Case& c :
       {Case{"", "", false}, Case{".gz", ".gz", false}, Case{".zlib", ".zlib", false},
        Case{".Z", ".Z", false}, Case{".final", "", true}, Case{".gz.final", ".gz", true},
        Case{".zlib.final", ".zlib", true}, Case{".Z.final", ".Z", true}}) {
    std::string name = std::string("Full-00000000-00009002-1565021494") + c.suffix;
    SnapshotInfo s = Parsed("backups/etcd-main/v2/" + name);
    EXPECT_EQ(s.kind, SnapshotKind::kFull) << name;
    EXPECT_EQ(s.start_revision, 0) << name;
    EXPECT_EQ(s.last_revision, 9002) << name;
    EXPECT_EQ(s.created_on, Unix(1565021494)) << name;
    EXPECT_EQ(s.compression_suffix, c.compression) << name;
    EXPECT_EQ(s.is_final, c.final) << name;
    EXPECT_FALSE(s.is_chunk) << name;
    EXPECT_EQ(s.prefix, "backups/etcd-main/v2/") << name;
    EXPECT_EQ(s.snap_dir, "") << name;
    EXPECT_EQ(s.snap_name, name);
    EXPECT_EQ(SnapshotKey(s), "backups/etcd-main/v2/" + name);
  }
}

TEST(ParseSnapshotKeyTest, RoundTripsMadeNames) {
  for (bool final : {false, true}) {
    SnapshotInfo made =
        NewSnapshot(SnapshotKind::kIncr, 100000001, 123456789012, Unix(1800000000), ".Z", final);
    SnapshotInfo s = Parsed("v2/" + made.snap_name);
    EXPECT_EQ(s.kind, made.kind);
    EXPECT_EQ(s.start_revision, made.start_revision);
    EXPECT_EQ(s.last_revision, made.last_revision);
    EXPECT_EQ(s.created_on, made.created_on);
    EXPECT_EQ(s.compression_suffix, ".Z");
    EXPECT_EQ(s.is_final, final);
    EXPECT_EQ(s.prefix, "v2/");
  }
}

TEST(ParseSnapshotKeyTest, V2Chunk) {
  SnapshotInfo s = Parsed("p/v2/Incr-00000011-00000020-1700000000.gz/0000000003");
  EXPECT_TRUE(s.is_chunk);
  EXPECT_EQ(s.kind, SnapshotKind::kIncr);
  EXPECT_EQ(s.start_revision, 11);
  EXPECT_EQ(s.last_revision, 20);
  EXPECT_EQ(s.compression_suffix, ".gz");
  EXPECT_EQ(s.prefix, "p/v2/");
  EXPECT_EQ(s.snap_dir, "");
  EXPECT_EQ(s.snap_name, "Incr-00000011-00000020-1700000000.gz/0000000003");
  EXPECT_EQ(SnapshotKey(s), "p/v2/Incr-00000011-00000020-1700000000.gz/0000000003");
}

TEST(ParseSnapshotKeyTest, V1KeysAndChunks) {
  SnapshotInfo s = Parsed("old/v1/Backup-1500000000/Full-00000000-00000100-1500000000");
  EXPECT_FALSE(s.is_chunk);
  EXPECT_EQ(s.prefix, "old/v1/");
  EXPECT_EQ(s.snap_dir, "Backup-1500000000");
  EXPECT_EQ(s.snap_name, "Full-00000000-00000100-1500000000");
  EXPECT_EQ(s.last_revision, 100);
  EXPECT_EQ(SnapshotKey(s), "old/v1/Backup-1500000000/Full-00000000-00000100-1500000000");

  SnapshotInfo c = Parsed("v1/Backup-1500000000/Incr-00000101-00000200-1500000060/0000000001");
  EXPECT_TRUE(c.is_chunk);
  EXPECT_EQ(c.prefix, "v1/");
  EXPECT_EQ(c.snap_dir, "Backup-1500000000");
  EXPECT_EQ(c.snap_name, "Incr-00000101-00000200-1500000060/0000000001");
  EXPECT_EQ(c.kind, SnapshotKind::kIncr);
  EXPECT_EQ(c.start_revision, 101);
}

TEST(ParseSnapshotKeyTest, LastV1WinsOverV2) {
  // gardener looks for the last "v1/" first; only without one does it look for "v2/".
  SnapshotInfo s = Parsed("v2/x/v1/Backup-1/Full-00000000-00000001-1");
  EXPECT_EQ(s.prefix, "v2/x/v1/");
  EXPECT_EQ(s.snap_dir, "Backup-1");
  SnapshotInfo t = Parsed("a/v2/b/v2/Full-00000000-00000001-1");
  EXPECT_EQ(t.prefix, "a/v2/b/v2/");
}

TEST(ParseSnapshotKeyTest, RejectsBadKeysSayingWhy) {
  struct Case {
    const char* key;
    const char* why;  // a fragment of the error message
  };
  const Case cases[] = {
      {"backups/Full-00000000-00000001-1700000000", "v1/ or v2/"},
      {"v2/a/b/Full-00000000-00000001-1700000000", "v2 key"},
      {"v2/Full-00000000-00000001-1700000000/1/2", "v2 key"},
      {"v1/Full-00000000-00000001-1700000000", "v1 key"},
      {"v1/Backup-1/Full-00000000-00000001-1700000000/1/2", "v1 key"},
      {"v1//Full-00000000-00000001-1700000000", "snapshot directory"},
      {"v2/Full-00000000-00000001", "is not <Kind>"},
      {"v2/Full-00000000-00000001-1700000000-5", "is not <Kind>"},
      {"v2/", "is not <Kind>"},
      {"v2/Delta-00000000-00000001-1700000000", "unknown snapshot kind"},
      {"v2/full-00000000-00000001-1700000000", "unknown snapshot kind"},
      {"v2/Full-0000000x-00000001-1700000000", "start revision"},
      {"v2/Full--00000001-1700000000", "start revision"},
      {"v2/Full-00000000-99999999999999999999-1700000000", "last revision"},
      {"v2/Incr-00000009-00000008-1700000000", "greater than last revision"},
      {"v2/Full-00000000-00000001-17000x0000", "creation time"},
      {"v2/Full-00000000-00000001-.gz", "creation time"},
      {"v2/Full-00000000-00000001-99999999999", "creation time"},
      {"v2/Full-00000000-00000001-1700000000.gz.tmp", "unexpected suffix"},
      {"v2/Full-00000000-00000001-1700000000.gz.final.final", "unexpected suffix"},
      {"v2/Full-00000000-00000001-1700000000.", "empty suffix"},
      {"v2/Full-00000000-00000001-1700000000/part1", "chunk part number"},
      {"v2/Full-00000000-00000001-1700000000/", "chunk part number"},
  };
  for (const Case& c : cases) {
    Result<SnapshotInfo> r = ParseSnapshotKey(c.key);
    ASSERT_FALSE(r.ok()) << c.key;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.key;
    EXPECT_NE(r.status().message().find(c.why), std::string::npos)
        << c.key << " -> " << r.status().message();
    EXPECT_NE(r.status().message().find(c.key), std::string::npos) << r.status().message();
  }
}

TEST(SnapshotJsonTest, FieldNamesAndFormat) {
  SnapshotInfo s = Parsed("etcd-main/v2/Full-00000000-00009002-1565021494.gz.final");
  nlohmann::json j = ToJson(s);
  EXPECT_EQ(j.size(), 12u);
  EXPECT_EQ(j["createdOn"], "2019-08-05T16:11:34Z");
  EXPECT_EQ(j["immutabilityExpriyTime"], "0001-01-01T00:00:00Z");
  EXPECT_TRUE(j.contains("versionID"));
  EXPECT_TRUE(j["versionID"].is_null());
  EXPECT_EQ(j["kind"], "Full");
  EXPECT_EQ(j["snapDir"], "");
  EXPECT_EQ(j["snapName"], "Full-00000000-00009002-1565021494.gz.final");
  EXPECT_EQ(j["prefix"], "etcd-main/v2/");
  EXPECT_EQ(j["compressionSuffix"], ".gz");
  EXPECT_EQ(j["startRevision"], 0);
  EXPECT_EQ(j["lastRevision"], 9002);
  EXPECT_TRUE(j["lastRevision"].is_number_integer());
  EXPECT_EQ(j["isChunk"], false);
  EXPECT_EQ(j["isFinal"], true);
}

TEST(SnapshotJsonTest, CreationTimeKeepsNanosecondsTrimmedLikeGo) {
  SnapshotInfo s = NewSnapshot(SnapshotKind::kIncr, 1, 2,
                               Unix(1565021494) + std::chrono::nanoseconds(123456789), "", false);
  EXPECT_EQ(ToJson(s)["createdOn"], "2019-08-05T16:11:34.123456789Z");
  s.created_on = Unix(1565021494) + std::chrono::milliseconds(120);
  EXPECT_EQ(ToJson(s)["createdOn"], "2019-08-05T16:11:34.12Z");
  s.created_on = Unix(951782400);  // a leap day, midnight
  EXPECT_EQ(ToJson(s)["createdOn"], "2000-02-29T00:00:00Z");
  EXPECT_EQ(ToJson(s)["kind"], "Incr");
}

TEST(SnapshotJsonTest, VersionAndImmutability) {
  SnapshotInfo s = NewSnapshot(SnapshotKind::kFull, 0, 2, Unix(1700000000), "", false);
  s.version_id = "3HL4kqtJlcpXroDTDmJ";
  s.immutability_expiry_time = Unix(1700086400) + std::chrono::microseconds(5);
  nlohmann::json j = ToJson(s);
  EXPECT_EQ(j["versionID"], "3HL4kqtJlcpXroDTDmJ");
  EXPECT_EQ(j["immutabilityExpriyTime"], "2023-11-15T22:13:20.000005Z");
}

// Found by the sidecar_http_api fuzzer: an object name that is not UTF-8 (any file name in a
// local store) made nlohmann's dump() throw, so /snapshot/latest answered 500 while that object
// was listed. Go's encoding/json writes each byte that begins no valid UTF-8 sequence as U+FFFD.
TEST(SnapshotJsonTest, NamesThatAreNotUtf8AreWrittenAsGoWritesThem) {
  SnapshotInfo s = Parsed("backups\xd7/v2/Full-00000000-00000001-1700000000.\xff");
  EXPECT_EQ(s.compression_suffix, ".\xff");  // the name parses: any suffix is kept
  s.snap_dir = "\xe2\x82x";                  // a sequence cut short: each byte replaced
  s.version_id = "\xed\xa0\x80\xc0\xaf";     // a surrogate and an overlong form
  nlohmann::json j = ToJson(s);
  const std::string r = "\xef\xbf\xbd";  // U+FFFD
  EXPECT_EQ(j["compressionSuffix"], "." + r);
  EXPECT_EQ(j["snapName"], "Full-00000000-00000001-1700000000." + r);
  EXPECT_EQ(j["prefix"], "backups" + r + "/v2/");
  EXPECT_EQ(j["snapDir"], r + r + "x");
  EXPECT_EQ(j["versionID"], r + r + r + r + r);
  EXPECT_NO_THROW((void)j.dump());
  // Valid UTF-8 of every length, up to U+10FFFF, is kept as it is.
  s.snap_dir = "\xc3\xa9\xe2\x82\xac\xf4\x8f\xbf\xbf";
  EXPECT_EQ(ToJson(s)["snapDir"], s.snap_dir);
  s.snap_dir = "\xf4\x90\x80\x80";  // above U+10FFFF
  EXPECT_EQ(ToJson(s)["snapDir"], r + r + r + r);
}

SnapshotInfo Snap(SnapshotKind kind, int64_t start, int64_t last, int64_t created,
                  bool chunk = false) {
  SnapshotInfo s = NewSnapshot(kind, start, last, Unix(created), "", false);
  if (chunk) {
    s.is_chunk = true;
    s.snap_name += "/0000000001";
  }
  s.prefix = "v2/";
  return s;
}

std::vector<std::string> Names(const std::vector<SnapshotInfo>& list) {
  std::vector<std::string> out;
  for (const SnapshotInfo& s : list) out.push_back(s.snap_name);
  return out;
}

TEST(SortSnapshotsTest, ByLastRevisionThenNonChunkFirstThenCreationTime) {
  std::vector<SnapshotInfo> list = {
      Snap(SnapshotKind::kIncr, 11, 20, 300), Snap(SnapshotKind::kIncr, 11, 20, 50, /*chunk=*/true),
      Snap(SnapshotKind::kFull, 0, 20, 200),  Snap(SnapshotKind::kFull, 0, 10, 900),
      Snap(SnapshotKind::kIncr, 21, 30, 100),
  };
  SortSnapshots(list);
  EXPECT_EQ(Names(list), (std::vector<std::string>{
                             "Full-00000000-00000010-900",
                             "Full-00000000-00000020-200",
                             "Incr-00000011-00000020-300",
                             "Incr-00000011-00000020-50/0000000001",
                             "Incr-00000021-00000030-100",
                         }));
}

TEST(SortSnapshotsTest, ChunksOfOneRevisionKeepTheirOrder) {
  std::vector<SnapshotInfo> list;
  for (int part : {1, 2, 3}) {
    SnapshotInfo s = Snap(SnapshotKind::kFull, 0, 5, 100 - part, /*chunk=*/true);
    s.snap_name = "Full-00000000-00000005-100/000000000" + std::to_string(part);
    list.push_back(s);
  }
  list.push_back(Snap(SnapshotKind::kFull, 0, 5, 100));
  SortSnapshots(list);
  EXPECT_FALSE(list[0].is_chunk);
  EXPECT_EQ(list[1].snap_name, "Full-00000000-00000005-100/0000000001");
  EXPECT_EQ(list[3].snap_name, "Full-00000000-00000005-100/0000000003");
}

TEST(LatestSetTest, NewestFullAndItsDeltasSkippingChunks) {
  std::vector<SnapshotInfo> list = {
      Snap(SnapshotKind::kFull, 0, 10, 100),
      Snap(SnapshotKind::kIncr, 11, 20, 110),
      Snap(SnapshotKind::kFull, 0, 25, 120),
      Snap(SnapshotKind::kIncr, 26, 30, 130),
      Snap(SnapshotKind::kFull, 0, 35, 140, /*chunk=*/true),
      Snap(SnapshotKind::kIncr, 31, 40, 150),
      Snap(SnapshotKind::kIncr, 41, 50, 160, /*chunk=*/true),
  };
  SortSnapshots(list);
  LatestSet set = FindLatestSet(list);
  ASSERT_TRUE(set.full.has_value());
  EXPECT_EQ(set.full->snap_name, "Full-00000000-00000025-120");
  EXPECT_EQ(Names(set.deltas),
            (std::vector<std::string>{"Incr-00000026-00000030-130", "Incr-00000031-00000040-150"}));
  EXPECT_EQ(set.LastRevision(), 40);
}

TEST(LatestSetTest, FullOnlyDeltasOnlyAndEmpty) {
  LatestSet full_only =
      FindLatestSet({Snap(SnapshotKind::kIncr, 1, 9, 90), Snap(SnapshotKind::kFull, 0, 12, 100)});
  ASSERT_TRUE(full_only.full.has_value());
  EXPECT_TRUE(full_only.deltas.empty());
  EXPECT_EQ(full_only.LastRevision(), 12);

  LatestSet deltas_only =
      FindLatestSet({Snap(SnapshotKind::kIncr, 1, 9, 90), Snap(SnapshotKind::kIncr, 10, 14, 100)});
  EXPECT_FALSE(deltas_only.full.has_value());
  EXPECT_EQ(deltas_only.deltas.size(), 2u);
  EXPECT_EQ(deltas_only.LastRevision(), 14);

  LatestSet empty = FindLatestSet({});
  EXPECT_FALSE(empty.full.has_value());
  EXPECT_EQ(empty.LastRevision(), 0);
}

TEST(LatestSetTest, JsonShape) {
  LatestSet empty;
  nlohmann::json j = LatestSetJson(empty);
  EXPECT_TRUE(j.contains("fullSnapshot"));
  EXPECT_TRUE(j["fullSnapshot"].is_null());
  EXPECT_TRUE(j.contains("deltaSnapshots"));
  EXPECT_TRUE(j["deltaSnapshots"].is_null());

  LatestSet set = FindLatestSet(
      {Snap(SnapshotKind::kFull, 0, 10, 100), Snap(SnapshotKind::kIncr, 11, 20, 110)});
  j = LatestSetJson(set);
  EXPECT_EQ(j["fullSnapshot"]["snapName"], "Full-00000000-00000010-100");
  ASSERT_TRUE(j["deltaSnapshots"].is_array());
  ASSERT_EQ(j["deltaSnapshots"].size(), 1u);
  EXPECT_EQ(j["deltaSnapshots"][0]["startRevision"], 11);
  EXPECT_EQ(j["deltaSnapshots"][0]["kind"], "Incr");
}

}  // namespace
}  // namespace etcdw::sidecar

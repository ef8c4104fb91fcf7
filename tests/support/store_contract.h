// Test support: the contract every snapshot store keeps (include/etcdw/sidecar/snap_store.h),
// checked the same way for each provider against its emulator: Save, List, Fetch and Delete of
// a full and a delta snapshot, a fetch over a longer stale file, a delete repeated, and a fetch
// of a deleted object (NotFound, no file left behind).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "etcdw/sidecar/snap_store.h"
#include "files.h"

namespace etcdw::testsupport {

// Runs the contract through `store`, whose --store-prefix is `prefix` and which must hold no
// snapshot under it yet. `scratch` is a directory for the local files; `not_found_code` is the
// provider's error code for a missing object, which the NotFound error must name. Call it
// through ASSERT_NO_FATAL_FAILURE.
inline void CheckStoreContract(sidecar::SnapStore& store, const std::string& prefix,
                               const std::string& scratch, const std::string& not_found_code) {
  using sidecar::NewSnapshot;
  using sidecar::SnapshotInfo;
  using sidecar::SnapshotKind;
  const auto at = [](int64_t s) {
    return std::chrono::system_clock::time_point(std::chrono::seconds(s));
  };
  const std::string full_src = scratch + "/contract-full";
  const std::string delta_src = scratch + "/contract-delta";
  ASSERT_TRUE(WriteFile(full_src, "full snapshot bytes"));
  ASSERT_TRUE(WriteFile(delta_src, std::string("delta\0bytes", 11)));
  SnapshotInfo full = NewSnapshot(SnapshotKind::kFull, 0, 100, at(1700000000), "", false);
  SnapshotInfo delta = NewSnapshot(SnapshotKind::kIncr, 101, 250, at(1700000060), ".gz", false);
  Status st = store.Save(full, full_src);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = store.Save(delta, delta_src);
  ASSERT_TRUE(st.ok()) << st.ToString();

  auto list = store.List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].snap_name, full.snap_name);
  EXPECT_EQ((*list)[0].prefix, sidecar::V2Prefix(prefix) + "/");
  EXPECT_EQ((*list)[0].last_revision, 100);
  EXPECT_EQ((*list)[1].snap_name, delta.snap_name);
  EXPECT_EQ((*list)[1].kind, SnapshotKind::kIncr);
  EXPECT_EQ((*list)[1].compression_suffix, ".gz");

  const std::string dest = scratch + "/contract-fetched";
  ASSERT_TRUE(WriteFile(dest, "stale content, longer than the object"));
  st = store.Fetch((*list)[1], dest);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ReadFile(dest), std::string("delta\0bytes", 11));
  st = store.Fetch((*list)[0], dest);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(ReadFile(dest), "full snapshot bytes");

  st = store.Delete((*list)[0]);
  ASSERT_TRUE(st.ok()) << st.ToString();
  st = store.Delete((*list)[0]);
  EXPECT_TRUE(st.ok()) << "deleting a missing object is OK: " << st.ToString();
  auto after = store.List();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ((*after)[0].snap_name, delta.snap_name);

  Status missing = store.Fetch((*list)[0], dest);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.code(), Code::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find(not_found_code), std::string::npos) << missing.ToString();
  EXPECT_FALSE(std::filesystem::exists(dest)) << "no partial download is left behind";
}

}  // namespace etcdw::testsupport

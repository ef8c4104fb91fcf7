#include "etcdw/storage/engine.h"

#include <gtest/gtest.h>

#include "etcdw/storage/versioned_key.h"

namespace etcdw::storage {
namespace {

TEST(EngineTest, VersionedKeysOrderNewestFirst) {
  EngineOptions o;
  o.in_memory = true;
  auto e = Engine::Open("/mem/versioned", o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  Batch b(**e);
  for (uint64_t v : {1, 5, 3}) b.Put(Column::kKeys, MakeVersionedKey("k", v), std::to_string(v));
  b.Put(Column::kKeys, MakeVersionedKey("j", 9), "j9");
  ASSERT_TRUE((*e)->Write(b, true).ok());
  auto it = (*e)->NewIterator(Column::kKeys);
  std::vector<std::string> seen;
  for (it->SeekToFirst(); it->Valid(); it->Next()) seen.emplace_back(it->value());
  EXPECT_EQ(seen, (std::vector<std::string>{"j9", "5", "3", "1"}));
  it->Seek(MakeVersionedKey("k", 4));
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->value(), "3");
}

}  // namespace
}  // namespace etcdw::storage

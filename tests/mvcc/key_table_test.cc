// The key table against a std::map model: random sets (new keys and replacements), erases of
// present and absent keys, and loads in key order, then every lookup, count and in-order walk
// answers as the model does. Keys are short (held in the string itself) and long (on the heap),
// so entries whose key bytes live inside the entry are covered too.
#include "etcdw/mvcc/key_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

namespace etcdw::mvcc {
namespace {

using Model = std::map<std::string, KeyMeta, std::less<>>;

std::string Key(uint64_t i) {
  // Every third key is long enough to leave the string's inline buffer.
  std::string k = "k" + std::to_string(i);
  if (i % 3 == 0) k += std::string(40, 'x');
  return k;
}

KeyMeta Meta(uint64_t r) {
  const auto v = static_cast<int64_t>(r);
  return KeyMeta{v, v + 1, v % 7 + 1, v % 5};
}

void ExpectSame(const KeyTable& t, const Model& m, std::mt19937_64& rng) {
  ASSERT_EQ(t.size(), m.size());
  std::vector<std::pair<std::string, KeyMeta>> walked;
  t.ForEachInOrder(
      [&](const std::string& k, const KeyMeta& meta) { walked.emplace_back(k, meta); });
  ASSERT_EQ(walked.size(), m.size());
  size_t n = 0;
  for (const auto& [k, meta] : m) {
    EXPECT_EQ(walked[n].first, k);
    EXPECT_EQ(walked[n].second, meta);
    const KeyMeta* found = t.Find(k);
    ASSERT_NE(found, nullptr) << k;
    EXPECT_EQ(*found, meta);
    ++n;
  }
  for (int i = 0; i < 50; ++i) {
    std::string a = Key(rng() % 400), b = Key(rng() % 400);
    if (i % 5 == 0) a.pop_back();  // bounds that are not keys
    EXPECT_EQ(t.Find(a) != nullptr, m.count(a) == 1) << a;
    EXPECT_EQ(t.CountFrom(a), std::distance(m.lower_bound(a), m.end())) << a;
    const int64_t want = a < b ? std::distance(m.lower_bound(a), m.lower_bound(b)) : 0;
    EXPECT_EQ(t.CountRange(a, b), want) << a << " .. " << b;
  }
}

TEST(KeyTableTest, AnswersAsAnOrderedMapThroughRandomChanges) {
  std::mt19937_64 rng(7);
  KeyTable t;
  Model m;
  for (int round = 0; round < 20; ++round) {
    for (int op = 0; op < 300; ++op) {
      const uint64_t r = rng();
      const std::string k = Key(r % 400);
      if (r % 4 == 0) {
        t.Erase(k);  // present or absent
        m.erase(k);
      } else {
        t.Set(k, Meta(r));
        m.insert_or_assign(k, Meta(r));
      }
    }
    ExpectSame(t, m, rng);
    if (HasFatalFailure()) return;
  }
}

TEST(KeyTableTest, ErasedKeysLeaveTheOrderAndTheCounts) {
  KeyTable t;
  for (uint64_t i = 0; i < 100; ++i) t.Set(Key(i), Meta(i));
  for (uint64_t i = 0; i < 100; i += 2) t.Erase(Key(i));
  size_t walked = 0;
  t.ForEachInOrder([&](const std::string& k, const KeyMeta& meta) {
    ++walked;
    EXPECT_NE(t.Find(k), nullptr) << k;
    EXPECT_EQ(*t.Find(k), meta);
  });
  EXPECT_EQ(walked, 50u);
  EXPECT_EQ(t.size(), 50u);
  EXPECT_EQ(t.CountFrom(""), 50);
  EXPECT_EQ(t.CountRange("k", "l"), 50);
  EXPECT_EQ(t.CountRange("k1", "k2"), 6);  // k1, k11, k13, k15, k17, k19
}

TEST(KeyTableTest, AFoundEntryStaysPutWhileOtherKeysComeAndGo) {
  KeyTable t;
  t.Set("kept", Meta(1));
  const KeyMeta* kept = t.Find("kept");
  for (uint64_t i = 0; i < 5000; ++i) t.Set(Key(i), Meta(i));  // the hash table grows
  for (uint64_t i = 0; i < 5000; i += 2) t.Erase(Key(i));
  EXPECT_EQ(t.Find("kept"), kept);
  EXPECT_EQ(*kept, Meta(1));
  t.Set("kept", Meta(9));
  EXPECT_EQ(*kept, Meta(9));
}

TEST(KeyTableTest, AppendTakesKeysInOrderOnlyAndAMovedTableKeepsItsOrder) {
  KeyTable t;
  EXPECT_TRUE(t.Append("b", Meta(1)));
  EXPECT_TRUE(t.Append("d", Meta(2)));
  EXPECT_FALSE(t.Append("c", Meta(3)));  // below the last
  EXPECT_FALSE(t.Append("d", Meta(4)));  // equal to the last
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.Find("c"), nullptr);
  EXPECT_EQ(*t.Find("d"), Meta(2));

  KeyTable moved = std::move(t);
  moved.Set("a", Meta(5));
  moved.Set("c", Meta(6));
  std::string order;
  moved.ForEachInOrder([&](const std::string& k, const KeyMeta&) { order += k; });
  EXPECT_EQ(order, "abcd");
  EXPECT_EQ(moved.CountRange("b", "d"), 2);
  EXPECT_EQ(moved.CountRange("d", "b"), 0);
  EXPECT_EQ(moved.CountFrom("bb"), 2);
}

TEST(KeyTableTest, EqualityComparesKeysAndMetadata) {
  KeyTable a, b;
  a.Set("x", Meta(1));
  a.Set("y", Meta(2));
  b.Set("y", Meta(2));
  EXPECT_FALSE(a == b);
  b.Set("x", Meta(1));
  EXPECT_TRUE(a == b);
  b.Set("x", Meta(3));
  EXPECT_FALSE(a == b);
  b.Erase("x");
  b.Set("z", Meta(1));
  EXPECT_FALSE(a == b);
}

}  // namespace
}  // namespace etcdw::mvcc

#include "etcdw/mvcc/kv_store.h"

#include <gtest/gtest.h>

#include "etcdw/mvcc/txn.h"

namespace etcdw::mvcc {
namespace {

TEST(KvStoreTest, PutAdvancesRevisionAndKeepsHistory) {
  storage::EngineOptions o;
  o.in_memory = true;
  auto e = storage::Engine::Open("/mem/kv", o);
  ASSERT_TRUE(e.ok());
  auto kv = KvStore::Open(**e);
  ASSERT_TRUE(kv.ok());
  for (const char* v : {"a", "b"}) {
    auto batch = (*kv)->BeginApply();
    auto txn = batch->Begin();
    etcdserverpb::PutRequest p;
    p.set_key("k");
    p.set_value(v);
    ASSERT_TRUE(ExecutePut(*txn, p).ok());
    batch->End(std::move(txn));
    ASSERT_TRUE((*kv)->Commit(*batch, 1).ok());
  }
  EXPECT_EQ((*kv)->Rev(), 3);
  auto view = (*kv)->NewReadView();
  etcdserverpb::RangeRequest r;
  r.set_key("k");
  r.set_revision(2);
  auto resp = ExecuteRange(*view, r);
  ASSERT_TRUE(resp.ok());
  ASSERT_EQ(resp->kvs_size(), 1);
  EXPECT_EQ(resp->kvs(0).value(), "a");
  EXPECT_EQ(resp->header().revision(), 3);
}

}  // namespace
}  // namespace etcdw::mvcc

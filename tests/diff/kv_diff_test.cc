// Differential tests of KV: Range, Put, DeleteRange, Compact.
#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

using etcdserverpb::RangeRequest;

TEST_F(DiffTest, PutThenGetMatchesEtcd) {
  StartBoth();
  Put("a", "1");
  Put("b", "2");
  Put("a", "3", 0, /*prev_kv=*/true);
  Get("a");
  Get("a", "", 2);  // historical
  Get("a", "c");
  Get("missing");
}

TEST_F(DiffTest, EmptyKeyIsRejectedLikeEtcd) {
  StartBoth();
  Outcome o = Put("", "x");
  EXPECT_EQ(o.code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(o.message, "etcdserver: key is not provided");
  Get("");
  Delete("");
}

TEST_F(DiffTest, FutureAndCompactedRevisionsMatchEtcd) {
  StartBoth();
  for (int i = 0; i < 5; ++i) Put("k", std::to_string(i));
  Outcome f = Get("k", "", 100);
  EXPECT_EQ(f.message, "etcdserver: mvcc: required revision is a future revision");
  Compact(4);
  Outcome c = Get("k", "", 3);
  EXPECT_EQ(c.message, "etcdserver: mvcc: required revision has been compacted");
  Get("k", "", 4);
  Compact(4);
  Compact(2);
  Compact(100);
}

}  // namespace
}  // namespace etcdw::testing

// Differential tests of Watch: one stream per member carrying the same requests; the responses
// are compared one by one after header normalization.
//
// Ordering: etcd delivers the responses of *different* watchers for one revision in no
// particular order (it iterates a Go map), so where one write reaches several watchers the
// responses are compared after a stable sort by watch ID (NextN(..., by_watch_id=true)); each
// watcher's own responses are always compared in order. Catch-up responses (watchers that start
// in the past) are read before the next watcher is created, because etcd sends them from a
// background loop and they may otherwise interleave with later control responses.
#include <grpcpp/generic/generic_stub.h>

#include <thread>

#include "diff_fixture.h"

namespace etcdw::testing {
namespace {

using etcdserverpb::WatchCreateRequest;
using etcdserverpb::WatchRequest;
using etcdserverpb::WatchResponse;

WatchRequest WithFilters(WatchRequest req, std::vector<WatchCreateRequest::FilterType> filters) {
  for (auto f : filters) req.mutable_create_request()->add_filters(f);
  return req;
}

// Sends `bytes` as a Watch request on a new stream of `m` and returns how the stream ended.
grpc::Status WatchWithRawRequest(Member& m, const std::string& bytes) {
  return testsupport::WatchWithRawRequest(m.client().channel, bytes);
}

TEST_F(DiffTest, WatchRequestThatDoesNotParseEndsTheStreamLikeEtcd) {
  StartBoth();
  // Field 1 (create_request) announcing 100 bytes, followed by 2.
  const std::string truncated("\x0a\x64\x0a\x01", 4);
  grpc::Status e = WatchWithRawRequest(etcd(), truncated);
  grpc::Status o = WatchWithRawRequest(ours(), truncated);
  EXPECT_EQ(e.error_code(), grpc::StatusCode::INTERNAL) << e.error_message();
  EXPECT_EQ(o.error_code(), e.error_code());
  // grpc-go appends the parser's own words, which differ between parsers.
  const std::string prefix = "grpc: failed to unmarshal the received message";
  EXPECT_EQ(e.error_message().rfind(prefix, 0), 0u) << e.error_message();
  EXPECT_EQ(o.error_message().rfind(prefix, 0), 0u) << o.error_message();
  // Both carry on serving.
  Put("a", "1");
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("a"));
  w.Next("created after the bad stream");
}

TEST_F(DiffTest, WatchIdsAndControlResponsesMatchEtcd) {
  StartBoth();
  Put("a", "1");
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("a"));
  auto r = w.Next("auto id 0");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->created());
  EXPECT_EQ(r->watch_id(), 0);
  EXPECT_EQ(r->header().revision(), 2);
  w.Send(CreateWatch("b"));
  w.Next("auto id 1");
  w.Send(CreateWatch("c", "", 0, false, 10));
  r = w.Next("client-chosen id 10");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->watch_id(), 10);
  w.Send(CreateWatch("c", "", 0, false, 10));
  r = w.Next("duplicate id 10");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->canceled());
  EXPECT_EQ(r->watch_id(), -1);
  EXPECT_EQ(r->cancel_reason(), "mvcc: duplicate watch ID provided on the WatchStream");
  w.Send(CreateWatch("d", "", 0, false, 2));
  w.Next("client-chosen id 2");
  w.Send(CreateWatch("e"));
  r = w.Next("auto id skips the taken 2");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->watch_id(), 3);
  w.Send(CreateWatch("n", "", 0, false, -5));
  w.Next("client-chosen negative id");
  w.Send(CancelWatch(0));
  r = w.Next("cancel 0");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->canceled());
  w.Send(CancelWatch(0));   // no longer exists: etcd answers nothing
  w.Send(CancelWatch(77));  // never existed
  w.ExpectNothingPending("cancel of unknown IDs");
  w.Send(CreateWatch("f"));
  r = w.Next("auto id after cancel");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->watch_id(), 4);  // IDs are not reused
  WatchRequest unknown;         // no request set: ignored
  w.Send(unknown);
  w.ExpectNothingPending("empty request");
  // The cancelled watcher gets nothing, the others their events.
  Put("a", "2");
  Put("e", "1");
  w.Next("event for e");
  Put("n", "1");
  w.Next("event for the negative id");
  w.Send(CancelWatch(-5));
  w.Next("cancel negative id");
  w.ExpectNothingPending("end");
}

TEST_F(DiffTest, WatchEmptyRangeIsRejectedLikeEtcd) {
  StartBoth();
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("b", "a"));
  auto r = w.Next("end before key");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->created());
  EXPECT_TRUE(r->canceled());
  EXPECT_EQ(r->cancel_reason(), "mvcc: watcher range is empty");
  w.Send(CreateWatch("a", "a"));
  w.Next("end equal to key");
  w.Send(CreateWatch("a", "a", 0, false, 5));
  w.Next("end equal to key, with an ID");
  w.Send(CreateWatch("a", "b"));
  r = w.Next("valid: gets the first automatic ID");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->watch_id(), 0);
}

TEST_F(DiffTest, WatchEventsOnSeveralWatchersMatchEtcd) {
  StartBoth();
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("a", "", 0, /*prev_kv=*/true));                                 // 0
  w.Send(CreateWatch("p/", "p0"));                                                   // 1: prefix
  w.Send(CreateWatch("m", kZero));                                                   // 2: from key
  w.Send(CreateWatch(kZero, kZero));                                                 // 3: all
  w.Send(CreateWatch("", kZero));                                                    // 4: all
  w.Send(WithFilters(CreateWatch("a", "b", 0, true), {WatchCreateRequest::NOPUT}));  // 5
  w.Send(CreateWatch(""));                                                           // 6: key "\0"
  w.Send(WithFilters(CreateWatch("a", "", 0, true), {WatchCreateRequest::NODELETE}));  // 7
  w.Send(WithFilters(CreateWatch("a", "", 0, false),
                     {WatchCreateRequest::NOPUT, WatchCreateRequest::NODELETE}));  // 8
  w.NextN(9, "created");
  Put("a", "1");
  w.NextN(4, "put a", true);  // 0 3 4 7
  Put("p/1", "1");
  w.NextN(4, "put p/1", true);  // 1 2 3 4
  Put("z", "1");
  w.NextN(3, "put z", true);
  Put("a", "2");
  w.NextN(4, "put a again", true);
  Delete("a");
  w.NextN(4, "delete a", true);  // 0 3 4 5
  etcdserverpb::TxnRequest t;
  *t.add_success() = OpPut("p/2", "2");
  *t.add_success() = OpPut("a", "3");
  *t.add_success() = OpDelete("z");
  *t.add_success() = OpPut("p/1", "1b");
  Txn(t);
  auto rs = w.NextN(6, "txn", true);  // 0 1 2 3 4 7
  for (const auto& r : rs) {
    for (const auto& ev : r.events()) {
      EXPECT_EQ(ev.kv().mod_revision(), r.header().revision()) << "one txn, one revision";
    }
  }
  Delete("p/", "p0", true);
  w.NextN(4, "delete prefix", true);
  Put("m", "1");
  w.NextN(3, "put m", true);
  Put(kZero, "zero");
  w.NextN(3, "put \\0", true);  // 3 4 6
  Delete(kZero, kZero);
  w.NextN(6, "delete everything", true);  // 0 2 3 4 5 6
  w.ExpectNothingPending("after all writes");
}

TEST_F(DiffTest, WatchFromPastRevisionsMatchesEtcd) {
  StartBoth();
  Put("a", "1");  // 2
  Put("b", "1");  // 3
  Put("a", "2");  // 4
  Delete("b");    // 5
  etcdserverpb::TxnRequest t;
  *t.add_success() = OpPut("a", "3");
  *t.add_success() = OpPut("c", "1");
  Txn(t);         // 6
  Put("b", "2");  // 7
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch(kZero, kZero, 1));
  w.NextN(2, "everything from revision 1");
  w.Send(CreateWatch("a", "", 3, /*prev_kv=*/true));
  w.NextN(2, "a from 3 with prev_kv");
  w.Send(CreateWatch("b", "c", 2, true));
  w.NextN(2, "b from 2 with prev_kv (a delete and a re-creation)");
  w.Send(WithFilters(CreateWatch("a", "z", 4), {WatchCreateRequest::NOPUT}));
  w.NextN(2, "deletes from 4");
  w.Send(WithFilters(CreateWatch("b", "", 2), {WatchCreateRequest::NOPUT}));
  w.NextN(2, "delete of b only");
  w.Send(CreateWatch("c", "", 7));
  w.Next("nothing since 7 for c: just created");
  w.Send(CreateWatch("b", "", 7));
  w.NextN(2, "b at exactly the current revision");
  w.Send(CreateWatch(kZero, kZero, 10));
  w.Next("future start: created");
  w.ExpectNothingPending("after catch-up");
  Put("a", "4");  // 8
  w.NextN(2, "put a (8)", true);
  Put("x", "1");  // 9
  w.NextN(1, "put x (9)", true);
  Put("a", "5");  // 10: the future watcher starts here
  w.NextN(3, "put a (10)", true);
  w.ExpectNothingPending("end");
}

TEST_F(DiffTest, WatchOnCompactedRevisionMatchesEtcd) {
  StartBoth();
  Put("a", "1");  // 2
  Put("a", "2");  // 3
  Put("a", "3");  // 4
  Put("b", "1");  // 5
  Compact(4);
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("a", "", 2));
  w.Next("created");
  auto r = w.Next("compacted");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->canceled());
  EXPECT_EQ(r->compact_revision(), 4);
  w.Send(CreateWatch("a", "", 3, true));
  w.NextN(2, "from 3: compacted too");
  w.Send(CreateWatch("a", "", 4));
  w.NextN(2, "from the compaction revision: served");
  // The event at the compaction revision has no prev_kv: etcd reads it at revision 3, which is
  // compacted.
  w.Send(CreateWatch("a", "", 4, true));
  w.NextN(2, "from the compaction revision with prev_kv");
  w.Send(CreateWatch("a", "c", 5, true));
  w.NextN(2, "from 5");
  // A negative start revision is below any compaction revision (etcd: -1 before compacting).
  w.Send(CreateWatch("a", "", -3));
  w.NextN(2, "negative start revision");
  w.Send(CancelWatch(0));
  w.Next("cancel of a compacted watcher");
  w.ExpectNothingPending("end");
  Put("a", "4");
  w.NextN(3, "later events", true);
}

TEST_F(DiffTest, WatchNegativeStartRevisionMatchesEtcd) {
  StartBoth();
  Put("a", "1");
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("a", "", -3));
  w.NextN(2, "negative start revision, never compacted");
  w.ExpectNothingPending("end");
}

// etcd sends a watcher's catch-up from history in responses of at most 1000 revisions that
// hold events for *that watcher*, however many other revisions lie in between.
TEST_F(DiffTest, WatchCatchUpBatchesLikeEtcd) {
  StartBoth();
  Put("x", "first");                // 2
  for (int i = 0; i < 1100; ++i) {  // 3..1102, two events each
    etcdserverpb::TxnRequest t;
    *t.add_success() = OpPut("o/" + std::to_string(i % 7), "v");
    *t.add_success() = OpPut("p/" + std::to_string(i % 5), "v");
    for (Member* m : both()) {
      etcdserverpb::TxnResponse resp;
      ASSERT_TRUE(m->client().kv->Txn(Ctx().get(), t, &resp).ok()) << m->label();
    }
  }
  Put("x", "last");  // 1103
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("x", "", 1));
  auto rs = w.NextN(2, "x from 1: one response across 1100 other revisions");
  if (rs.size() == 2) {
    EXPECT_EQ(rs[1].events_size(), 2);
  }
  w.ExpectNothingPending("x");
  w.Send(CreateWatch(kZero, kZero, 1));
  rs = w.NextN(3, "everything from 1: 1000 revisions, then the rest");
  if (rs.size() == 3) {
    EXPECT_EQ(rs[1].events_size(), 1 + 999 * 2);
  }
  w.ExpectNothingPending("everything");
  w.Send(CreateWatch("p/", "p0", 500));
  w.NextN(2, "p/ from 500");
  w.ExpectNothingPending("end");
}

TEST_F(DiffTest, WatchCancelAndHalfCloseMatchEtcd) {
  StartBoth();
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("a"));
  w.Send(CreateWatch("a", "b"));
  w.NextN(2, "created");
  Put("a", "1");
  w.NextN(2, "event", true);
  w.Send(CancelWatch(1));
  w.Next("canceled");
  Put("a", "2");
  w.Next("only watcher 0");
  // The client closes its sending side: etcd keeps delivering events.
  w.etcd().CloseSend();
  w.ours().CloseSend();
  Put("a", "3");
  w.Next("after half-close");
}

TEST_F(DiffTest, WatchProgressRequestMatchesEtcd) {
  StartBoth();
  Put("a", "1");
  WatchPair w(etcd(), ours());
  w.Send(ProgressRequest());
  auto r = w.Next("progress without watchers");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->watch_id(), -1);
  EXPECT_EQ(r->header().revision(), 2);
  w.Send(CreateWatch("a"));
  w.Send(CreateWatch("b"));
  w.NextN(2, "created");
  Put("a", "2");
  w.Next("event");
  Put("c", "1");
  w.Send(ProgressRequest());
  r = w.Next("progress with synced watchers");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->header().revision(), 4);
  EXPECT_FALSE(r->created());
  EXPECT_FALSE(r->canceled());
}

// Deliberate deviation from etcd 3.4 (fixed in etcd 3.5, etcd-io/etcd#15220): etcd 3.4 answers
// a progress request at once, even while a watcher of the stream is still catching up from
// history, so the client may learn revision N before it received the events up to N. We
// answer once every watcher of the stream is synced, so the progress response comes after the
// catch-up events. Only our server is checked here.
TEST_F(DiffTest, WatchProgressRequestWaitsForCatchUp) {
  StartBoth();
  for (int i = 0; i < 50; ++i) PutBoth("k" + std::to_string(i), std::string(1000, 'v'));
  WatchSession s(ours());
  ASSERT_TRUE(s.Send(CreateWatch("k", "l", 1)));
  ASSERT_TRUE(s.Send(ProgressRequest()));
  auto created = s.Next();
  ASSERT_TRUE(created);
  EXPECT_TRUE(created->created());
  int events = 0;
  while (events < 50) {
    auto r = s.Next();
    ASSERT_TRUE(r) << "catch-up incomplete after " << events << " events";
    ASSERT_NE(r->watch_id(), -1) << "progress response before the catch-up finished";
    events += r->events_size();
  }
  auto p = s.Next();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->watch_id(), -1);
  EXPECT_EQ(p->header().revision(), 51);
}

// Reads `s` until a response with events arrives; progress notifications before it are checked
// (watcher `id`, no events, a revision not above `max_rev`) and skipped: they come on each
// server's own clock.
std::optional<WatchResponse> NextEvents(WatchSession& s, const char* label, int64_t id,
                                        int64_t max_rev) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = s.Next();
    if (!r) break;
    if (r->events_size() > 0 || r->created() || r->canceled()) return r;
    EXPECT_EQ(r->watch_id(), id) << label << ": notification for the wrong watcher";
    EXPECT_LE(r->header().revision(), max_rev) << label;
  }
  ADD_FAILURE() << label << ": no event";
  return std::nullopt;
}

// Reads `s` until a progress notification of watcher `id` at revision `rev` arrives; earlier
// ones (lower revisions) are skipped.
std::optional<WatchResponse> NextProgress(WatchSession& s, const char* label, int64_t id,
                                          int64_t rev) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = s.Next();
    if (!r) break;
    EXPECT_EQ(r->events_size(), 0) << label << ": unexpected event " << r->ShortDebugString();
    EXPECT_EQ(r->watch_id(), id) << label;
    EXPECT_FALSE(r->created() || r->canceled()) << label;
    EXPECT_LE(r->header().revision(), rev) << label;
    if (r->header().revision() == rev) return r;
  }
  ADD_FAILURE() << label << ": no progress notification at revision " << rev;
  return std::nullopt;
}

TEST_F(DiffTest, WatchProgressNotifyMatchesEtcd) {
  // etcd 3.4 takes the interval as a flag ("1s"); our configuration file takes the same text.
  StartBoth({{"experimental-watch-progress-notify-interval", "1s"}});
  Put("a", "1");
  WatchPair w(etcd(), ours());
  WatchRequest req = CreateWatch("a", "b");
  req.mutable_create_request()->set_progress_notify(true);
  w.Send(req);  // 0: with progress notifications
  w.NextN(1, "created");
  // Notifications arrive on each server's own clock (etcd: per stream, with jitter), so what is
  // compared is their content: the watcher's ID, no events, and the current revision. A
  // notification is skipped when events were sent since the previous one.
  auto a = NextProgress(w.etcd(), "etcd", 0, 2);
  auto b = NextProgress(w.ours(), "etcd-wrapper", 0, 2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(Normalized(*a), Normalized(*b));
  Put("a", "2");
  a = NextEvents(w.etcd(), "etcd", 0, 3);
  b = NextEvents(w.ours(), "etcd-wrapper", 0, 3);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(Normalized(*a), Normalized(*b));
  Put("z", "1");  // not watched: the revision moves on
  a = NextProgress(w.etcd(), "etcd", 0, 4);
  b = NextProgress(w.ours(), "etcd-wrapper", 0, 4);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(Normalized(*a), Normalized(*b));
}

TEST_F(DiffTest, WatchProgressNotifyOnlyWhenAskedLikeEtcd) {
  StartBoth({{"experimental-watch-progress-notify-interval", "1s"}});
  WatchPair w(etcd(), ours());
  w.Send(CreateWatch("a"));  // 0: without progress notifications
  WatchRequest req = CreateWatch("b");
  req.mutable_create_request()->set_progress_notify(true);
  w.Send(req);  // 1: with
  w.NextN(2, "created");
  w.Send(CancelWatch(1));
  // Until the cancel response, notifications of watcher 1 may come; after it, none at all
  // (more than two intervals are waited for).
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  for (WatchSession* s : {&w.etcd(), &w.ours()}) {
    bool canceled = false;
    for (auto& r : s->Drain(std::chrono::milliseconds(200))) {
      EXPECT_EQ(r.watch_id(), 1) << r.ShortDebugString();
      EXPECT_FALSE(canceled) << "response after the cancel: " << r.ShortDebugString();
      if (r.canceled()) canceled = true;
    }
    EXPECT_TRUE(canceled);
  }
}

TEST_F(DiffTest, WatchFragmentsLargeResponsesLikeEtcd) {
  // Responses above max-request-bytes + 512 KiB are split for watchers that asked for it.
  StartBoth({{"max-request-bytes", "65536"}});
  const std::string big(60000, 'x');
  for (int i = 0; i < 12; ++i) PutBoth("big/" + std::to_string(10 + i), big);
  WatchPair w(etcd(), ours());
  WatchRequest frag = CreateWatch("big/", "big0", 1);
  frag.mutable_create_request()->set_fragment(true);
  w.Send(frag);
  auto rs = w.NextN(3, "catch-up in fragments");
  ASSERT_EQ(rs.size(), 3u);
  EXPECT_TRUE(rs[1].fragment());
  EXPECT_FALSE(rs[2].fragment());
  EXPECT_EQ(rs[1].events_size() + rs[2].events_size(), 12);
  w.Send(CreateWatch("big/", "big0", 1));
  w.NextN(2, "catch-up without fragments: one response");
  // Synced watchers: one revision deleting every key, with prev_kv (large events).
  WatchRequest frag_prev = CreateWatch("big/", "big0", 0, true);
  frag_prev.mutable_create_request()->set_fragment(true);
  w.Send(frag_prev);
  w.Next("created");
  Delete("big/", "big0");
  rs = w.NextN(4, "delete range", true);  // 0: deletes without values; 2: 2 fragments
  w.ExpectNothingPending("end");
}

}  // namespace
}  // namespace etcdw::testing

#include "etcdw/member/watch_hub.h"

#include <gtest/gtest.h>

#include <thread>

#include "etcdw/mvcc/txn.h"
#include "support/await.h"

namespace etcdw::member {
namespace {

using etcdserverpb::WatchCreateRequest;
using etcdserverpb::WatchResponse;

// A sink whose writes complete only when the test says so (a client reading slowly).
class FakeSink : public WatchSink {
 public:
  void StartWrite(std::string wire) override {
    WatchResponse r;
    EXPECT_TRUE(r.ParseFromString(wire));
    std::lock_guard lock(mu_);
    written_.push_back(std::move(r));
    inflight_ = true;
  }
  void Finish() override {
    std::lock_guard lock(mu_);
    finished_ = true;
  }
  // Completes writes until the stream has nothing more to send.
  void Drain(WatchStream& s) {
    while (true) {
      {
        std::lock_guard lock(mu_);
        if (!inflight_) return;
        inflight_ = false;
      }
      s.WriteDone(true);
    }
  }
  std::vector<WatchResponse> written() {
    std::lock_guard lock(mu_);
    return written_;
  }
  bool finished() {
    std::lock_guard lock(mu_);
    return finished_;
  }

 private:
  std::mutex mu_;
  std::vector<WatchResponse> written_;
  bool inflight_ = false;
  bool finished_ = false;
};

class WatchHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::EngineOptions o;
    o.in_memory = true;
    engine_ = std::move(storage::Engine::Open("/mem/watch", o)).value();
    kv_ = std::move(mvcc::KvStore::Open(*engine_)).value();
    WatchHubOptions wo;
    wo.stream_queue_bytes = 4096;
    wo.catchup_events = 50;
    wo.fragment_bytes = 2048;
    hub_ = std::make_unique<WatchHub>(*kv_, wo);
    hub_->Start();
  }
  void TearDown() override { hub_->Stop(); }

  // Applies puts (one transaction each) and notifies the hub as the applier does; a
  // compaction to `compact` (when not 0) is applied in the same batch, after them.
  void Put(const std::string& k, const std::string& v, int n = 1, int64_t compact = 0) {
    auto batch = kv_->BeginApply();
    for (int i = 0; i < n; ++i) {
      auto txn = batch->Begin();
      etcdserverpb::PutRequest p;
      p.set_key(k);
      p.set_value(v);
      ASSERT_TRUE(mvcc::ExecutePut(*txn, p).ok());
      batch->End(std::move(txn));
    }
    if (compact != 0) {
      ASSERT_TRUE(kv_->Compact(*batch, compact).ok());
    }
    ASSERT_TRUE(kv_->Commit(*batch, ++index_).ok());
    hub_->Notify(batch->changes(), kv_->Rev());
  }
  void Delete(const std::string& k) {
    auto batch = kv_->BeginApply();
    auto txn = batch->Begin();
    etcdserverpb::DeleteRangeRequest d;
    d.set_key(k);
    ASSERT_TRUE(mvcc::ExecuteDeleteRange(*txn, d).ok());
    batch->End(std::move(txn));
    ASSERT_TRUE(kv_->Commit(*batch, ++index_).ok());
    hub_->Notify(batch->changes(), kv_->Rev());
  }

  static WatchCreateRequest Create(const std::string& key, const std::string& end = "",
                                   int64_t start = 0) {
    WatchCreateRequest c;
    c.set_key(key);
    c.set_range_end(end);
    c.set_start_revision(start);
    return c;
  }

  // Waits until the sink has at least `n` responses, completing writes as they come.
  std::vector<WatchResponse> WaitFor(FakeSink& sink, WatchStream& s, size_t n) {
    testsupport::WaitUntil([&] {
      sink.Drain(s);
      return sink.written().size() >= n;
    });
    return sink.written();
  }

  static std::vector<int64_t> EventRevisions(const std::vector<WatchResponse>& rs) {
    std::vector<int64_t> out;
    for (const auto& r : rs) {
      for (const auto& e : r.events()) out.push_back(e.kv().mod_revision());
    }
    return out;
  }

  std::unique_ptr<storage::Engine> engine_;
  std::unique_ptr<mvcc::KvStore> kv_;
  std::unique_ptr<WatchHub> hub_;
  uint64_t index_ = 0;
};

TEST_F(WatchHubTest, CreatedThenEventsInOrderWithFilters) {
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  s->Create(Create("a"));
  auto nodelete = Create("a");
  nodelete.add_filters(WatchCreateRequest::NODELETE);
  nodelete.set_prev_kv(true);
  s->Create(nodelete);
  Put("a", "1");
  Put("b", "x");  // not watched
  Put("a", "2");
  Delete("a");
  // Two creations, then five events (responses of one watcher queued behind a write may have
  // been merged: at least three responses, at most five).
  auto w = WaitFor(sink, *s, 5);
  for (int i = 0; i < 5 && EventRevisions(w).size() < 5; ++i) w = WaitFor(sink, *s, w.size() + 1);
  ASSERT_EQ(EventRevisions(w).size(), 5u);
  ASSERT_GE(w.size(), 5u);
  ASSERT_LE(w.size(), 7u);
  EXPECT_TRUE(w[0].created());
  EXPECT_EQ(w[0].watch_id(), 0);
  EXPECT_EQ(w[0].header().revision(), 1);
  EXPECT_TRUE(w[1].created());
  EXPECT_EQ(w[1].watch_id(), 1);
  std::vector<int64_t> w0, w1;
  for (size_t i = 2; i < w.size(); ++i) {
    ASSERT_GE(w[i].events_size(), 1);
    for (const auto& ev : w[i].events()) {
      if (w[i].watch_id() == 0) {
        w0.push_back(ev.kv().mod_revision());
        EXPECT_FALSE(ev.has_prev_kv()) << "prev_kv only when asked";
      } else {
        w1.push_back(ev.kv().mod_revision());
        EXPECT_EQ(ev.type(), mvccpb::Event::PUT);
        if (ev.kv().version() == 2) {
          EXPECT_EQ(ev.prev_kv().value(), "1");
        }
      }
    }
  }
  EXPECT_EQ(w0, (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(w1, (std::vector<int64_t>{2, 4}));
  s->Close();
  EXPECT_TRUE(sink.finished());
}

TEST_F(WatchHubTest, ReplaysHistoryThenContinuesLive) {
  for (int i = 0; i < 120; ++i) Put("k" + std::to_string(i % 7), "v" + std::to_string(i));
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  s->Create(Create("k", "l", 10));  // prefix, from revision 10
  testsupport::WaitUntil([&] {
    sink.Drain(*s);
    return hub_->UnsyncedCount() == 0;
  });
  Put("k1", "live");
  std::vector<int64_t> revs;
  testsupport::WaitUntil([&] {
    sink.Drain(*s);
    revs = EventRevisions(sink.written());
    return !revs.empty() && revs.back() == 122;
  });
  std::vector<int64_t> want;
  for (int64_t r = 10; r <= 122; ++r) want.push_back(r);
  EXPECT_EQ(revs, want);
  s->Close();
}

TEST_F(WatchHubTest, SlowWatcherDoesNotBufferWithoutBoundAndLosesNothing) {
  FakeSink slow;
  auto s = hub_->NewStream(&slow);
  s->Create(Create("k", "l"));
  slow.Drain(*s);
  // The client does not read: changes keep coming.
  std::string value(200, 'x');
  for (int i = 0; i < 400; ++i) Put("k" + std::to_string(i % 13), value);
  // The stream holds at most about its queue limit, the rest waits in history.
  size_t queued_bytes = 0;
  for (const auto& r : slow.written()) queued_bytes += r.ByteSizeLong();
  EXPECT_GT(hub_->UnsyncedCount(), 0u);
  // Now the client reads: everything arrives, in order, without gaps or duplicates.
  std::vector<int64_t> revs;
  testsupport::WaitUntil([&] {
    slow.Drain(*s);
    revs = EventRevisions(slow.written());
    return revs.size() >= 400 && hub_->UnsyncedCount() == 0;
  });
  std::vector<int64_t> want;
  for (int64_t r = 2; r <= 401; ++r) want.push_back(r);
  EXPECT_EQ(revs, want);
  EXPECT_EQ(hub_->UnsyncedCount(), 0u);
  s->Close();
}

TEST_F(WatchHubTest, EventsQueuedBehindAWriteAreMergedPerWatcherInOrder) {
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  s->Create(Create("a"));
  s->Create(Create("b"));
  auto created = WaitFor(sink, *s, 2);
  ASSERT_EQ(created.size(), 2u);
  int64_t watch_a = created[0].watch_id(), watch_b = created[1].watch_id();
  // The sink completes no write until drained (a slow client): after the first response is
  // written, the rest queue behind it.
  Put("a", "1");
  Put("a", "2");
  Put("a", "3");
  Put("b", "4");
  Put("a", "5");
  std::vector<std::pair<int64_t, int64_t>> events;  // (watch id, revision) in sending order
  std::vector<WatchResponse> rs;
  for (int i = 0; i < 500 && events.size() < 5; ++i) {
    rs = WaitFor(sink, *s, 3);
    events.clear();
    for (size_t k = 2; k < rs.size(); ++k) {
      for (const auto& ev : rs[k].events()) {
        events.emplace_back(rs[k].watch_id(), ev.kv().mod_revision());
      }
    }
  }
  // Nothing lost, reordered or overtaken by another watcher's response...
  EXPECT_EQ(events, (std::vector<std::pair<int64_t, int64_t>>{
                        {watch_a, 2}, {watch_a, 3}, {watch_a, 4}, {watch_b, 5}, {watch_a, 6}}));
  // ...and revisions of watcher a that waited together went out as one response, its header
  // at the newest of them. Only one write starts before the sink is drained, so the three
  // events of a before b's fall into at most two responses: one of them holds two or three.
  ASSERT_GE(rs.size(), 5u);
  ASSERT_LE(rs.size(), 6u);
  int most = 0;
  for (size_t k = 2; k < rs.size(); ++k) {
    if (rs[k].watch_id() != watch_a) continue;
    most = std::max(most, rs[k].events_size());
    EXPECT_EQ(rs[k].header().revision(), rs[k].events(rs[k].events_size() - 1).kv().mod_revision());
  }
  EXPECT_GE(most, 2);
  s->Close();
}

TEST_F(WatchHubTest, WatchOnCompactedRevisionIsCanceledWithCompactRevision) {
  for (int i = 0; i < 10; ++i) Put("c", std::to_string(i));
  {
    auto batch = kv_->BeginApply();
    ASSERT_TRUE(kv_->Compact(*batch, 6).ok());
    ASSERT_TRUE(kv_->Commit(*batch, ++index_).ok());
  }
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  s->Create(Create("c", "", 3));
  auto w = WaitFor(sink, *s, 2);
  ASSERT_GE(w.size(), 2u);
  EXPECT_TRUE(w[0].created());
  EXPECT_TRUE(w[1].canceled());
  EXPECT_EQ(w[1].compact_revision(), 6);
  EXPECT_EQ(w[1].events_size(), 0);
  // The client's cancel of the compacted watcher is acknowledged, as etcd does.
  s->Cancel(0);
  w = WaitFor(sink, *s, 3);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_TRUE(w[2].canceled());
  s->Close();
}

TEST_F(WatchHubTest, PrevKvIsReadWhenSentAndLeftOutOnceCompacted) {
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  auto req = Create("p");
  req.set_prev_kv(true);
  s->Create(req);
  Put("p", "1");  // 2
  Put("p", "2");  // 3: replaces 2
  // 4 replaces 3, and the same batch compacts at 4: etcd reads prev_kv at revision 3,
  // compacted by then, and sends the event without it.
  Put("p", "3", 1, /*compact=*/4);
  Put("p", "4");  // 5: replaces 4, which the compaction at 4 keeps
  std::vector<mvccpb::Event> events;
  for (int i = 0; i < 10 && events.size() < 4; ++i) {
    events.clear();
    for (const auto& r : WaitFor(sink, *s, 2 + static_cast<size_t>(i))) {
      for (const auto& e : r.events()) events.push_back(e);
    }
  }
  ASSERT_EQ(events.size(), 4u);
  EXPECT_FALSE(events[0].has_prev_kv());  // created the key
  ASSERT_TRUE(events[1].has_prev_kv());
  EXPECT_EQ(events[1].prev_kv().value(), "1");
  EXPECT_EQ(events[1].prev_kv().mod_revision(), 2);
  EXPECT_FALSE(events[2].has_prev_kv()) << "revision 3 is compacted";
  ASSERT_TRUE(events[3].has_prev_kv());
  EXPECT_EQ(events[3].prev_kv().value(), "3");
  EXPECT_EQ(events[3].prev_kv().version(), 3);
  s->Close();
}

TEST_F(WatchHubTest, CreateErrorsAndCancel) {
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  auto dup = Create("x");
  dup.set_watch_id(7);
  s->Create(dup);
  s->Create(dup);
  s->Create(Create("b", "a"));  // empty range
  s->Cancel(99);                // unknown: no answer
  s->Cancel(7);
  auto w = WaitFor(sink, *s, 4);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].watch_id(), 7);
  EXPECT_TRUE(w[1].created() && w[1].canceled());
  EXPECT_EQ(w[1].watch_id(), -1);
  EXPECT_EQ(w[1].cancel_reason(), "mvcc: duplicate watch ID provided on the WatchStream");
  EXPECT_EQ(w[2].cancel_reason(), "mvcc: watcher range is empty");
  EXPECT_EQ(w[3].watch_id(), 7);
  EXPECT_TRUE(w[3].canceled());
  EXPECT_FALSE(w[3].created());
  s->Close();
}

TEST_F(WatchHubTest, ProgressRequestWaitsUntilWatchersAreSynced) {
  for (int i = 0; i < 300; ++i) Put("p", std::to_string(i));
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  s->Create(Create("p", "", 2));
  s->RequestProgress();
  std::vector<WatchResponse> w;
  testsupport::WaitUntil([&] {
    sink.Drain(*s);
    w = sink.written();
    return !w.empty() && w.back().watch_id() == -1;
  });
  ASSERT_FALSE(w.empty());
  const WatchResponse& progress = w.back();
  EXPECT_EQ(progress.watch_id(), -1);
  EXPECT_EQ(progress.events_size(), 0);
  EXPECT_EQ(progress.header().revision(), 301);
  // Every event up to the reported revision was delivered before it.
  auto revs = EventRevisions(w);
  ASSERT_FALSE(revs.empty());
  EXPECT_EQ(revs.back(), 301);
  s->Close();
}

// kube-apiserver's consistent reads from its watch cache (etcd 3.5.13+): it watches a
// resource's prefix, and to learn that its cache is current it sends a progress request and
// waits for the answer (watch ID -1) at a revision at least that of its read. A watcher with
// no events of its own still gets the current revision.
TEST_F(WatchHubTest, KubeApiserverProgressRequestOnAQuietWatchReportsTheCurrentRevision) {
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  s->Create(Create("/registry/pods/", "/registry/pods0"));
  sink.Drain(*s);
  Put("/registry/services/s", "v", 3);  // revisions 2..4, none of them watched
  s->RequestProgress();
  auto w = WaitFor(sink, *s, 2);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_TRUE(w[0].created());
  EXPECT_EQ(w[1].watch_id(), -1);
  EXPECT_EQ(w[1].header().revision(), 4);
  EXPECT_EQ(w[1].events_size(), 0);
  EXPECT_FALSE(w[1].created() || w[1].canceled());
  s->Close();
}

// A watcher whose client reads slowly falls behind (its events wait in history): a progress
// request is answered only once they were all delivered, after the last of them, never with a
// revision ahead of an event still to come.
TEST_F(WatchHubTest, ProgressRequestOfASlowClientComesAfterItsEvents) {
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  s->Create(Create("/registry/pods/", "/registry/pods0"));  // its "created" write stays in flight
  const std::string value(300, 'v');
  for (int i = 0; i < 40; ++i) Put("/registry/pods/p" + std::to_string(i), value);
  Put("/registry/services/s", "v");  // revision 42
  testsupport::WaitUntil([&] { return hub_->UnsyncedCount() == 1; });
  ASSERT_EQ(hub_->UnsyncedCount(), 1u) << "the stream's queue (4 KiB) should have overflowed";
  s->RequestProgress();
  std::vector<WatchResponse> w;
  testsupport::WaitUntil([&] {
    sink.Drain(*s);
    w = sink.written();
    return !w.empty() && w.back().watch_id() == -1;
  });
  ASSERT_FALSE(w.empty());
  EXPECT_EQ(w.back().watch_id(), -1);
  EXPECT_EQ(w.back().header().revision(), 42);
  auto revs = EventRevisions(w);
  ASSERT_EQ(revs.size(), 40u);
  EXPECT_EQ(revs.front(), 2);
  EXPECT_EQ(revs.back(), 41);
  for (size_t i = 0; i + 1 < w.size(); ++i) EXPECT_NE(w[i].watch_id(), -1) << i;
  s->Close();
}

TEST_F(WatchHubTest, ProgressTickOnlyForIdleWatchersThatAskedForIt) {
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  auto notify = Create("n");
  notify.set_progress_notify(true);
  s->Create(notify);
  s->Create(Create("m"));
  sink.Drain(*s);
  hub_->ProgressTick();
  auto w = WaitFor(sink, *s, 3);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[2].watch_id(), 0);
  EXPECT_EQ(w[2].events_size(), 0);
  Put("n", "1");
  hub_->ProgressTick();  // it just got an event: no progress notification
  w = WaitFor(sink, *s, 4);
  EXPECT_EQ(w.size(), 4u);
  EXPECT_EQ(w[3].events_size(), 1);
  hub_->ProgressTick();
  w = WaitFor(sink, *s, 5);
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[4].header().revision(), 2);
  s->Close();
}

TEST_F(WatchHubTest, FragmentsLargeResponsesWhenAsked) {
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  auto frag = Create("f", "g");
  frag.set_fragment(true);
  s->Create(frag);
  s->Create(Create("f", "g"));
  sink.Drain(*s);
  Put("f", std::string(900, 'v'), 1);
  // One transaction writing many keys produces one revision with many events.
  {
    auto batch = kv_->BeginApply();
    auto txn = batch->Begin();
    for (int i = 0; i < 6; ++i) {
      etcdserverpb::PutRequest p;
      p.set_key("f" + std::to_string(i));
      p.set_value(std::string(900, 'w'));
      ASSERT_TRUE(mvcc::ExecutePut(*txn, p).ok());
    }
    batch->End(std::move(txn));
    ASSERT_TRUE(kv_->Commit(*batch, ++index_).ok());
    hub_->Notify(batch->changes(), kv_->Rev());
  }
  std::vector<WatchResponse> frags, whole;
  testsupport::WaitUntil([&] {
    sink.Drain(*s);
    frags.clear();
    whole.clear();
    for (const auto& r : sink.written()) {
      if (r.created() || r.events_size() == 0) continue;
      (r.watch_id() == 0 ? frags : whole).push_back(r);
    }
    int fe = 0;
    for (auto& r : frags) fe += r.events_size();
    return fe == 7 && !whole.empty() && whole.back().events_size() == 6;
  });
  ASSERT_EQ(whole.size(), 2u);  // without fragment: one response per revision
  ASSERT_GT(frags.size(), 2u);  // with fragment: the 6-event revision is split
  for (size_t i = 1; i + 1 < frags.size(); ++i) EXPECT_TRUE(frags[i].fragment());
  EXPECT_FALSE(frags.back().fragment());
  for (size_t i = 1; i < frags.size(); ++i) EXPECT_LE(frags[i].ByteSizeLong(), 2048u + 1000);
  s->Close();
}

TEST_F(WatchHubTest, ClosingAStreamWithAWriteInFlightFinishesAfterIt) {
  FakeSink sink;
  auto s = hub_->NewStream(&sink);
  s->Create(Create("z"));
  s->Close();
  EXPECT_FALSE(sink.finished());  // the created response is still being written
  sink.Drain(*s);
  EXPECT_TRUE(sink.finished());
  EXPECT_EQ(hub_->WatcherCount(), 0u);
  Put("z", "after close");  // no delivery, no crash
  EXPECT_EQ(sink.written().size(), 1u);
}

}  // namespace
}  // namespace etcdw::member

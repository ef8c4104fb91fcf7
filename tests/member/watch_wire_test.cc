#include "etcdw/member/watch_wire.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace etcdw::member {
namespace {

using etcdserverpb::ResponseHeader;
using etcdserverpb::WatchResponse;

mvccpb::KeyValue Kv(const std::string& key, size_t value_bytes, int64_t rev) {
  mvccpb::KeyValue kv;
  kv.set_key(key);
  kv.set_value(std::string(value_bytes, 'v'));
  kv.set_create_revision(2);
  kv.set_mod_revision(rev);
  kv.set_version(rev - 1);
  kv.set_lease(0x694d5c1f2a3b4c5d);
  return kv;
}

// A put replacing a version (values of `value_bytes`: lengths of one, two and three bytes).
mvccpb::Event Put(const std::string& key, size_t value_bytes, int64_t rev) {
  mvccpb::Event ev;
  ev.set_type(mvccpb::Event::PUT);
  *ev.mutable_kv() = Kv(key, value_bytes, rev);
  *ev.mutable_prev_kv() = Kv(key, value_bytes / 2, rev - 1);
  return ev;
}

mvccpb::Event Delete(const std::string& key, int64_t rev) {
  mvccpb::Event ev;
  ev.set_type(mvccpb::Event::DELETE);
  ev.mutable_kv()->set_key(key);
  ev.mutable_kv()->set_mod_revision(rev);
  *ev.mutable_prev_kv() = Kv(key, 10, rev - 1);
  return ev;
}

ResponseHeader Header(int64_t rev) {
  ResponseHeader h;
  h.set_cluster_id(0xcdf818194e3a8c32);
  h.set_member_id(0x8e9e05c52164694d);
  h.set_revision(rev);
  h.set_raft_term(3);
  return h;
}

// What protobuf writes for a response holding `events` (prev_kv kept or dropped); no header
// field when `h` is null.
std::string Reference(const ResponseHeader* h, int64_t watch_id, bool fragment,
                      const std::vector<mvccpb::Event>& events, bool with_prev) {
  WatchResponse r;
  if (h) *r.mutable_header() = *h;
  r.set_watch_id(watch_id);
  r.set_fragment(fragment);
  for (const auto& ev : events) {
    mvccpb::Event* e = r.add_events();
    *e = ev;
    if (!with_prev) e->clear_prev_kv();
  }
  return r.SerializeAsString();
}

TEST(WatchWireTest, AnEventIsEncodedAsProtobufWritesIt) {
  for (size_t value : {0, 5, 300, 20000}) {
    for (bool with_prev : {false, true}) {
      for (const mvccpb::Event& ev : {Put("/registry/pods/a", value, 9), Delete("/k", 9)}) {
        SCOPED_TRACE("value " + std::to_string(value) + (with_prev ? " with" : " without") +
                     " prev_kv, type " + std::to_string(ev.type()));
        EXPECT_EQ(*EncodeEvent(ev, with_prev ? &ev.prev_kv() : nullptr),
                  Reference(nullptr, 0, false, {ev}, with_prev));
      }
    }
  }
  mvccpb::Event bare;  // no kv at all: only what is set is written
  EXPECT_EQ(*EncodeEvent(bare, nullptr), Reference(nullptr, 0, false, {bare}, true));
}

TEST(WatchWireTest, EventResponsesAreByteIdenticalToTheWholeMessage) {
  const std::vector<mvccpb::Event> events = {Put("/a", 300, 10), Delete("/b", 10),
                                             Put("/c", 20000, 10)};
  const ResponseHeader h10 = Header(10);
  for (int64_t watch_id : {0, 1, 300}) {
    for (bool fragment : {false, true}) {
      for (bool with_prev : {false, true}) {
        std::vector<EncodedEvent> enc;
        for (const auto& ev : events) {
          enc.push_back(EncodeEvent(ev, with_prev ? &ev.prev_kv() : nullptr));
        }
        WireResponse r = WireResponse::Events(Header(10), watch_id, fragment, enc);
        const std::string want = Reference(&h10, watch_id, fragment, events, with_prev);
        EXPECT_EQ(r.Encode(), want);
        EXPECT_EQ(r.size(), want.size());
        EXPECT_EQ(r.event_count(), 3u);
        EXPECT_EQ(r.watch_id(), watch_id);
        EXPECT_EQ(r.mergeable(), !fragment);
      }
    }
  }
  EXPECT_FALSE(WireResponse::Events(Header(10), 1, false, {}).mergeable());
}

TEST(WatchWireTest, MergingKeepsBothRevisionsEventsUnderTheLaterHeader) {
  const mvccpb::Event first = Put("/a", 300, 10);
  const mvccpb::Event second = Delete("/a", 11);
  WireResponse r =
      WireResponse::Events(Header(10), 7, false, {EncodeEvent(first, &first.prev_kv())});
  r.Merge(WireResponse::Events(Header(11), 7, false, {EncodeEvent(second, &second.prev_kv())}));
  const ResponseHeader h11 = Header(11);
  const std::string want = Reference(&h11, 7, false, {first, second}, true);
  EXPECT_EQ(r.Encode(), want);
  EXPECT_EQ(r.size(), want.size());
  EXPECT_EQ(r.event_count(), 2u);
}

TEST(WatchWireTest, ControlResponsesAreTheMessageAsIsAndNeverMerged) {
  WatchResponse c;
  *c.mutable_header() = Header(4);
  c.set_watch_id(2);
  c.set_canceled(true);
  c.set_compact_revision(3);
  c.set_cancel_reason("mvcc: required revision has been compacted");
  WireResponse r = WireResponse::Control(c);
  EXPECT_EQ(r.Encode(), c.SerializeAsString());
  EXPECT_EQ(r.size(), c.ByteSizeLong());
  EXPECT_EQ(r.watch_id(), 2);
  EXPECT_FALSE(r.mergeable());
}

TEST(WatchWireTest, EachFormOfAnEventIsEncodedOnce) {
  const mvccpb::Event put = Put("/a", 30, 5);
  EventEncodings e(put);
  const EncodedEvent plain = e.Get(false);
  const EncodedEvent with = e.Get(true);
  EXPECT_NE(*plain, *with);
  EXPECT_EQ(e.Get(false).get(), plain.get());
  EXPECT_EQ(e.Get(true).get(), with.get());

  // Without a previous version both forms are one encoding.
  mvccpb::Event created = put;
  created.clear_prev_kv();
  EventEncodings c(created);
  EXPECT_EQ(c.Get(true).get(), c.Get(false).get());
  EXPECT_EQ(*c.Get(true), *plain);
}

TEST(WatchWireTest, APreviousVersionThePutDidNotReadIsReadOnceWhenWanted) {
  const mvccpb::Event full = Put("/a", 30, 5);
  mvccpb::Event lazy = full;
  lazy.clear_prev_kv();
  std::vector<std::pair<std::string, int64_t>> reads;
  const PrevReader reader = [&](const mvccpb::Event& ev, int64_t rev) {
    reads.emplace_back(ev.kv().key(), rev);
    return std::optional<mvccpb::KeyValue>(full.prev_kv());
  };
  EventEncodings e(lazy, 4, &reader);
  EXPECT_EQ(*e.Get(false), *EncodeEvent(full, nullptr));
  EXPECT_TRUE(reads.empty()) << "not read for watchers without prev_kv";
  EXPECT_EQ(*e.Get(true), *EncodeEvent(full, &full.prev_kv()));
  EXPECT_EQ(e.Get(true).get(), e.Get(true).get());
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0], std::make_pair(std::string("/a"), int64_t{4}));

  // A version that cannot be read: the event goes out without prev_kv, read only once.
  reads.clear();
  const PrevReader missing = [&](const mvccpb::Event& ev, int64_t rev) {
    reads.emplace_back(ev.kv().key(), rev);
    return std::optional<mvccpb::KeyValue>();
  };
  EventEncodings m(lazy, 4, &missing);
  EXPECT_EQ(*m.Get(true), *EncodeEvent(full, nullptr));
  EXPECT_EQ(m.Get(true).get(), m.Get(false).get());
  EXPECT_EQ(reads.size(), 1u);

  // A revision without a reader (history events carry prev_kv themselves): nothing to read.
  EventEncodings n(lazy, 4, nullptr);
  EXPECT_EQ(*n.Get(true), *EncodeEvent(full, nullptr));
}

}  // namespace
}  // namespace etcdw::member

#include "etcdw/sidecar/delta.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>

#include <string>

#include "etcdw/common/hash.h"
#include "support/clock_util.h"

namespace etcdw::sidecar {
namespace {

using std::chrono::system_clock;

using testsupport::SetTimeZone;

// 2026-01-01T10:00:00Z plus `ns` nanoseconds.
system_clock::time_point At(int64_t ns = 0) {
  constexpr int64_t kSeconds = 1767261600;  // 2026-01-01T10:00:00Z
  return system_clock::time_point(std::chrono::duration_cast<system_clock::duration>(
      std::chrono::seconds(kSeconds) + std::chrono::nanoseconds(ns)));
}

mvccpb::Event Put(const std::string& key, const std::string& value, int64_t create, int64_t mod,
                  int64_t version, int64_t lease = 0) {
  mvccpb::Event e;
  e.set_type(mvccpb::Event::PUT);
  mvccpb::KeyValue* kv = e.mutable_kv();
  kv->set_key(key);
  kv->set_value(value);
  kv->set_create_revision(create);
  kv->set_mod_revision(mod);
  kv->set_version(version);
  kv->set_lease(lease);
  return e;
}

mvccpb::Event Delete(const std::string& key, int64_t mod) {
  mvccpb::Event e;
  e.set_type(mvccpb::Event::DELETE);
  e.mutable_kv()->set_key(key);
  e.mutable_kv()->set_mod_revision(mod);
  return e;
}

// A delta payload: `json` followed by its SHA-256.
std::string WithHash(const std::string& json) {
  common::Sha256 sha;
  sha.Update(json);
  auto d = sha.Final();
  return json + std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

class DeltaTest : public ::testing::Test {
 protected:
  void SetUp() override { SetTimeZone("UTC"); }
  void TearDown() override { SetTimeZone("UTC"); }

  // ParseDelta of `json` (with a correct hash) must fail with DataLoss mentioning `needle`.
  static void ExpectRejected(const std::string& json, const std::string& needle) {
    Result<std::vector<DeltaEvent>> r = ParseDelta(WithHash(json));
    ASSERT_FALSE(r.ok()) << json;
    EXPECT_EQ(r.status().code(), Code::kDataLoss) << json;
    EXPECT_NE(r.status().message().find(needle), std::string::npos)
        << json << " -> " << r.status().message();
  }
};

// The example element of the reference (§5.3), byte for byte.
const char kReferencePut[] =
    R"({"etcdEvent":{"kv":{"key":"Zm9v","create_revision":5,"mod_revision":7,"version":2,)"
    R"("value":"YmFy"}},"time":"2026-01-01T10:00:00.123456789Z"})";

TEST_F(DeltaTest, ReferenceExampleRoundTripsByteForByte) {
  EXPECT_EQ(EventJson(Put("foo", "bar", 5, 7, 2), At(123456789)), kReferencePut);

  Result<std::vector<DeltaEvent>> r = ParseDelta(WithHash(std::string("[") + kReferencePut + "]"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 1u);
  const DeltaEvent& ev = (*r)[0];
  EXPECT_EQ(ev.event.type(), mvccpb::Event::PUT);
  EXPECT_EQ(ev.event.kv().key(), "foo");
  EXPECT_EQ(ev.event.kv().value(), "bar");
  EXPECT_EQ(ev.event.kv().create_revision(), 5);
  EXPECT_EQ(ev.event.kv().mod_revision(), 7);
  EXPECT_EQ(ev.event.kv().version(), 2);
  EXPECT_EQ(ev.event.kv().lease(), 0);
  EXPECT_FALSE(ev.event.has_prev_kv());
  EXPECT_EQ(ev.time, "2026-01-01T10:00:00.123456789Z");
  EXPECT_EQ(EventJson(ev.event, At(123456789)), kReferencePut);
}

TEST_F(DeltaTest, DeleteCarriesTypeAndOmitsZeroFields) {
  EXPECT_EQ(EventJson(Delete("foo", 9), At(5000000)),
            R"({"etcdEvent":{"type":1,"kv":{"key":"Zm9v","mod_revision":9}},)"
            R"("time":"2026-01-01T10:00:00.005Z"})");
  Result<std::vector<DeltaEvent>> r = ParseDelta(
      WithHash(R"([{"etcdEvent":{"type":1,"kv":{"key":"Zm9v","mod_revision":9}},"time":"x"}])"));
  ASSERT_FALSE(r.ok());  // the time is not RFC 3339
  r = ParseDelta(WithHash(R"([{"etcdEvent":{"type":1,"kv":{"key":"Zm9v","mod_revision":9}},)"
                          R"("time":"2026-01-01T11:00:00+01:00"}])"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].event.type(), mvccpb::Event::DELETE);
  EXPECT_EQ((*r)[0].event.kv().key(), "foo");
  EXPECT_EQ((*r)[0].event.kv().mod_revision(), 9);
  EXPECT_EQ((*r)[0].event.kv().value(), "");
}

TEST_F(DeltaTest, LeaseAndPrevKvInGoFieldOrder) {
  mvccpb::Event e = Put("k", "v2", 3, 8, 2, 7587862036371030021);
  *e.mutable_prev_kv() = Put("k", "v1", 3, 3, 1).kv();
  const std::string want =
      R"({"etcdEvent":{"kv":{"key":"aw==","create_revision":3,"mod_revision":8,"version":2,)"
      R"("value":"djI=","lease":7587862036371030021},"prev_kv":{"key":"aw==",)"
      R"("create_revision":3,"mod_revision":3,"version":1,"value":"djE="}},)"
      R"("time":"2026-01-01T10:00:00Z"})";
  EXPECT_EQ(EventJson(e, At()), want);
  Result<std::vector<DeltaEvent>> r = ParseDelta(WithHash("[" + want + "]"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[0].event.SerializeAsString(), e.SerializeAsString());
}

TEST_F(DeltaTest, BinaryKeysAndValuesSurviveBase64) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  DeltaWriter w;
  for (size_t len : {1, 2, 3, 4, 5, 256}) {
    w.Add(Put(all.substr(256 - len), all.substr(0, len), 1, static_cast<int64_t>(len), 1), At());
  }
  Result<std::vector<DeltaEvent>> r = ParseDelta(w.Finish());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 6u);
  size_t i = 0;
  for (size_t len : {1, 2, 3, 4, 5, 256}) {
    EXPECT_EQ((*r)[i].event.kv().key(), all.substr(256 - len)) << len;
    EXPECT_EQ((*r)[i].event.kv().value(), all.substr(0, len)) << len;
    ++i;
  }
}

TEST_F(DeltaTest, TimeFollowsGoRfc3339Nano) {
  auto time_of = [](system_clock::time_point t) {
    std::string j = EventJson(Delete("a", 1), t);
    size_t p = j.find("\"time\":\"") + 8;
    return j.substr(p, j.size() - p - 2);
  };
  EXPECT_EQ(time_of(At()), "2026-01-01T10:00:00Z");
  EXPECT_EQ(time_of(At(120000000)), "2026-01-01T10:00:00.12Z");
  EXPECT_EQ(time_of(At(1)), "2026-01-01T10:00:00.000000001Z");
  EXPECT_EQ(time_of(At(-1)), "2026-01-01T09:59:59.999999999Z");
  SetTimeZone("EET-2");  // UTC+2, no DST rule
  EXPECT_EQ(time_of(At(500000000)), "2026-01-01T12:00:00.5+02:00");
  SetTimeZone("XYZ+3:30");  // UTC-3:30
  EXPECT_EQ(time_of(At()), "2026-01-01T06:30:00-03:30");
}

TEST_F(DeltaTest, WriterAccumulatesAndResets) {
  DeltaWriter w;
  EXPECT_EQ(w.event_count(), 0u);
  w.Add(Put("a", "1", 10, 10, 1), At());
  size_t one = w.size_bytes();
  EXPECT_EQ(one, 1 + EventJson(Put("a", "1", 10, 10, 1), At()).size());  // "[" + event
  w.Add(Delete("a", 11), At(1));
  w.Add(Put("b", "2", 12, 12, 1), At(2));
  EXPECT_EQ(w.event_count(), 3u);
  EXPECT_EQ(w.first_revision(), 10);
  EXPECT_EQ(w.last_revision(), 12);
  size_t json_size = w.size_bytes();

  std::string payload = w.Finish();
  ASSERT_EQ(payload.size(), json_size + 1 + 32);
  EXPECT_EQ(payload.front(), '[');
  EXPECT_EQ(payload[json_size], ']');
  EXPECT_EQ(payload, WithHash(payload.substr(0, json_size + 1)));
  EXPECT_EQ(w.event_count(), 0u);
  EXPECT_EQ(w.size_bytes(), 0u);

  Result<std::vector<DeltaEvent>> r = ParseDelta(payload);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[1].event.type(), mvccpb::Event::DELETE);
  EXPECT_EQ((*r)[2].event.kv().key(), "b");
  EXPECT_EQ((*r)[2].time, "2026-01-01T10:00:00.000000002Z");

  // An empty writer still produces a valid (empty) delta.
  std::string empty = w.Finish();
  EXPECT_EQ(empty, WithHash("[]"));
  EXPECT_TRUE(ParseDelta(empty)->empty());
}

TEST_F(DeltaTest, AcceptsWhatGoAccepts) {
  // Omitted and explicit-zero type are PUT; null fields are empty; unknown fields are ignored;
  // whitespace is allowed; time is optional (Go leaves it zero).
  Result<std::vector<DeltaEvent>> r = ParseDelta(WithHash(R"([
    {"etcdEvent": {"type": 0, "kv": {"key": "Zm9v", "mod_revision": 4, "value": null,
                   "lease": null, "extra": [1, 2]}}, "time": "2026-01-01T10:00:00Z"},
    {"etcdEvent": {"kv": {"key": "YmFy", "create_revision": 5, "mod_revision": 5,
                   "version": 1, "value": "eA=="}, "prev_kv": null}}
  ])"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].event.type(), mvccpb::Event::PUT);
  EXPECT_EQ((*r)[0].event.kv().mod_revision(), 4);
  EXPECT_EQ((*r)[1].event.type(), mvccpb::Event::PUT);
  EXPECT_EQ((*r)[1].event.kv().value(), "x");
  EXPECT_EQ((*r)[1].time, "");
}

TEST_F(DeltaTest, HashMismatchIsDataLoss) {
  std::string payload = WithHash(std::string("[") + kReferencePut + "]");
  std::string bad_json = payload;
  bad_json[10] ^= 0x01;
  std::string bad_hash = payload;
  bad_hash.back() ^= 0x01;
  for (const std::string& p : {bad_json, bad_hash}) {
    Result<std::vector<DeltaEvent>> r = ParseDelta(p);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kDataLoss);
    EXPECT_NE(r.status().message().find("hash mismatch"), std::string::npos)
        << r.status().message();
  }
}

TEST_F(DeltaTest, MissingHashIsDataLoss) {
  for (const std::string& p : {std::string(), std::string("[]"), std::string(32, 'x')}) {
    Result<std::vector<DeltaEvent>> r = ParseDelta(p);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kDataLoss);
    EXPECT_NE(r.status().message().find("missing hash"), std::string::npos) << r.status().message();
  }
}

TEST_F(DeltaTest, MalformedJsonIsDataLoss) {
  ExpectRejected("[{", "malformed delta snapshot JSON");
  ExpectRejected("[] trailing", "malformed delta snapshot JSON");
  ExpectRejected(R"({"etcdEvent":{}})", "not a JSON array");
  ExpectRejected("[1]", "event 0: not an object");
  ExpectRejected(R"([{"time":"2026-01-01T10:00:00Z"}])", "no etcdEvent");
  ExpectRejected(R"([{"etcdEvent":{"type":1}}])", "has no kv");
  ExpectRejected(R"([{"etcdEvent":{"type":2,"kv":{"key":"YQ=="}}}])", "unknown event type 2");
  ExpectRejected(R"([{"etcdEvent":{"type":"PUT","kv":{"key":"YQ=="}}}])", "type");
  ExpectRejected(R"([{"etcdEvent":{"kv":{"key":"YQ"}}}])", "kv.key is not base64");
  ExpectRejected(R"([{"etcdEvent":{"kv":{"key":"Y!=="}}}])", "kv.key is not base64");
  ExpectRejected(R"([{"etcdEvent":{"kv":{"key":5}}}])", "kv.key is not base64");
  ExpectRejected(R"([{"etcdEvent":{"kv":{"key":"YQ==","create_revision":"5"}}}])",
                 "kv.create_revision is not a 64-bit integer");
  ExpectRejected(R"([{"etcdEvent":{"kv":{"key":"YQ==","mod_revision":5.5}}}])",
                 "kv.mod_revision is not a 64-bit integer");
  ExpectRejected(R"([{"etcdEvent":{"kv":{"key":"YQ==","version":9223372036854775808}}}])",
                 "kv.version is not a 64-bit integer");
  ExpectRejected(R"([{"etcdEvent":{"kv":{"key":"YQ=="},"prev_kv":{"lease":true}}}])",
                 "prev_kv.lease");
  ExpectRejected(R"([{"etcdEvent":{"kv":{"key":"YQ=="}},"time":"2026-01-01 10:00:00"}])",
                 "not an RFC 3339 time");
  ExpectRejected(R"([{"etcdEvent":{"kv":{"key":"YQ=="}}},{"etcdEvent":{"kv":[]}}])",
                 "event 1: kv is not an object");
}

}  // namespace
}  // namespace etcdw::sidecar

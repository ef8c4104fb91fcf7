// Watch responses in wire form (a serialized etcdserverpb.WatchResponse), built so that an event
// delivered to many watchers is encoded once.
//
// Protobuf writes a message's fields in field-number order and `events` (field 11) comes last
// in WatchResponse, so an event response is its "head" (header, watch_id, fragment, serialized
// as a message) followed by one `events` field per event. Each event's field (tag, length and
// the encoded mvccpb.Event) is built once per delivered revision and shared by every watcher's
// response; writing a response concatenates the parts. The result is byte for byte what
// serializing the whole WatchResponse gives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etcd/etcdserverpb/rpc.pb.h"

namespace etcdw::member {

// One complete `events` field of a WatchResponse, shared by the responses that carry it.
using EncodedEvent = std::shared_ptr<const std::string>;

// Encodes `ev` as an `events` field with `prev_kv` as its previous version (none when null;
// ev.prev_kv() itself is not looked at).
EncodedEvent EncodeEvent(const mvccpb::Event& ev, const mvccpb::KeyValue* prev_kv);

// Reads the version `ev` replaced, written at `rev`; nullopt when it cannot be had (the event
// then goes out without prev_kv).
using PrevReader =
    std::function<std::optional<mvccpb::KeyValue>(const mvccpb::Event& ev, int64_t rev)>;

// An event's two encodings (for watchers with and without prev_kv), each built on first use.
// The previous version is the event's prev_kv or, when the put did not read it
// (mvcc::RevisionEvents::prev_revs), the version at `unread_prev_rev`, read through `read_prev`
// the first time a watcher wants it.
class EventEncodings {
 public:
  explicit EventEncodings(const mvccpb::Event& ev, int64_t unread_prev_rev = 0,
                          const PrevReader* read_prev = nullptr)
      : ev_(&ev), unread_prev_rev_(read_prev ? unread_prev_rev : 0), read_prev_(read_prev) {}
  const mvccpb::Event& event() const { return *ev_; }
  const EncodedEvent& Get(bool with_prev_kv);

 private:
  const mvccpb::Event* ev_;
  int64_t unread_prev_rev_;
  const PrevReader* read_prev_;
  EncodedEvent plain_;
  EncodedEvent with_prev_;
};

// A response waiting on a watch stream's send queue.
class WireResponse {
 public:
  // A response without events (created, canceled, compacted, progress notification).
  static WireResponse Control(const etcdserverpb::WatchResponse& resp);
  // `events` for watcher `watch_id` under `header`; `fragment`: more fragments follow.
  static WireResponse Events(const etcdserverpb::ResponseHeader& header, int64_t watch_id,
                             bool fragment, std::vector<EncodedEvent> events);

  // The encoded size in bytes.
  size_t size() const { return size_; }
  // Only events (not a control response, not a fragment): may be merged with a later one.
  bool mergeable() const { return mergeable_; }
  int64_t watch_id() const { return watch_id_; }
  size_t event_count() const { return events_.size(); }
  // Appends the events of `later` (a mergeable response for the same watcher) and takes its
  // header: the client sees one response carrying both revisions' events.
  void Merge(WireResponse&& later);
  // The serialized WatchResponse.
  std::string Encode() const;

 private:
  std::string head_;
  std::vector<EncodedEvent> events_;
  size_t size_ = 0;
  int64_t watch_id_ = 0;
  bool mergeable_ = false;
};

}  // namespace etcdw::member

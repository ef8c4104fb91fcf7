#include "etcdw/member/watch_wire.h"

#include "etcdw/common/varint.h"

namespace etcdw::member {

namespace {

// Protobuf wire format: a field's key is (number << 3) | wire type; type 2 is length-delimited.
constexpr char kEventTypeKey = (1 << 3) | 0;        // mvccpb.Event.type (varint)
constexpr char kEventKvKey = (2 << 3) | 2;          // mvccpb.Event.kv
constexpr char kEventPrevKey = (3 << 3) | 2;        // mvccpb.Event.prev_kv
constexpr char kResponseEventsKey = (11 << 3) | 2;  // etcdserverpb.WatchResponse.events

using common::AppendVarint;
using common::VarintSize;

// Appends a length-delimited field holding `msg`.
void AppendMessageField(std::string& out, char key, const mvccpb::KeyValue& msg, size_t size) {
  out.push_back(key);
  AppendVarint(out, size);
  const size_t at = out.size();
  out.resize(at + size);
  msg.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + at));
}

}  // namespace

EncodedEvent EncodeEvent(const mvccpb::Event& ev, const mvccpb::KeyValue* prev_kv) {
  // The fields in number order, as protobuf writes them: type (omitted when PUT, the default),
  // kv, prev_kv.
  const bool kv = ev.has_kv();
  const bool prev = prev_kv != nullptr;
  const size_t kv_size = kv ? ev.kv().ByteSizeLong() : 0;
  const size_t prev_size = prev ? prev_kv->ByteSizeLong() : 0;
  size_t body = 0;
  if (ev.type() != 0) body += 1 + VarintSize(static_cast<uint64_t>(ev.type()));
  if (kv) body += 1 + VarintSize(kv_size) + kv_size;
  if (prev) body += 1 + VarintSize(prev_size) + prev_size;

  auto out = std::make_shared<std::string>();
  out->reserve(1 + VarintSize(body) + body);
  out->push_back(kResponseEventsKey);
  AppendVarint(*out, body);
  if (ev.type() != 0) {
    out->push_back(kEventTypeKey);
    AppendVarint(*out, static_cast<uint64_t>(ev.type()));
  }
  if (kv) AppendMessageField(*out, kEventKvKey, ev.kv(), kv_size);
  if (prev) AppendMessageField(*out, kEventPrevKey, *prev_kv, prev_size);
  return out;
}

const EncodedEvent& EventEncodings::Get(bool with_prev_kv) {
  if (with_prev_kv && !with_prev_) {
    if (ev_->has_prev_kv()) {
      with_prev_ = EncodeEvent(*ev_, &ev_->prev_kv());
    } else if (unread_prev_rev_ != 0) {
      std::optional<mvccpb::KeyValue> prev = (*read_prev_)(*ev_, unread_prev_rev_);
      if (prev) with_prev_ = EncodeEvent(*ev_, &*prev);
      unread_prev_rev_ = 0;  // read once, found or not
    }
  }
  // Without a previous version both forms are the same bytes.
  if (with_prev_kv && with_prev_) return with_prev_;
  if (!plain_) plain_ = EncodeEvent(*ev_, nullptr);
  return plain_;
}

WireResponse WireResponse::Control(const etcdserverpb::WatchResponse& resp) {
  WireResponse r;
  r.head_ = resp.SerializeAsString();
  r.size_ = r.head_.size();
  r.watch_id_ = resp.watch_id();
  r.mergeable_ = false;
  return r;
}

WireResponse WireResponse::Events(const etcdserverpb::ResponseHeader& header, int64_t watch_id,
                                  bool fragment, std::vector<EncodedEvent> events) {
  etcdserverpb::WatchResponse head;
  *head.mutable_header() = header;
  head.set_watch_id(watch_id);
  head.set_fragment(fragment);
  WireResponse r;
  r.head_ = head.SerializeAsString();
  r.size_ = r.head_.size();
  for (const auto& e : events) r.size_ += e->size();
  r.events_ = std::move(events);
  r.watch_id_ = watch_id;
  r.mergeable_ = !fragment && !r.events_.empty();
  return r;
}

void WireResponse::Merge(WireResponse&& later) {
  size_ = size_ - head_.size() + later.size_;
  head_ = std::move(later.head_);
  events_.reserve(events_.size() + later.events_.size());
  for (auto& e : later.events_) events_.push_back(std::move(e));
}

std::string WireResponse::Encode() const {
  std::string out;
  out.reserve(size_);
  out += head_;
  for (const auto& e : events_) out += *e;
  return out;
}

}  // namespace etcdw::member

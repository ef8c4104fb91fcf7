#include "etcdw/member/watch_hub.h"

#include <algorithm>

#include "etcdw/common/deferred_wakes.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/thread_name.h"
#include "etcdw/mvcc/history.h"

namespace etcdw::member {

using etcdserverpb::WatchResponse;

// Guarded by the hub's mutex, like the registries that hold it.
struct Watcher {
  uint64_t serial = 0;  // unique for the hub's lifetime (identifies it across unlocked work)
  int64_t id = 0;
  mvcc::KeyRange range;
  bool prev_kv = false;
  bool no_put = false;
  bool no_delete = false;
  bool progress_notify = false;
  bool fragment = false;
  int64_t next_rev = 0;  // first revision not yet delivered
  bool synced = false;
  bool compacted = false;  // told it was compacted; kept until the client cancels it
  bool events_since_tick = false;
  WatchStream* stream = nullptr;
};

namespace {
uint64_t NextSerial() {
  static std::atomic<uint64_t> serial{0};
  return ++serial;
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// WatchStream

WatchStream::WatchStream(WatchHub& hub, WatchSink* sink) : hub_(hub), sink_(sink) {}
WatchStream::~WatchStream() = default;

bool WatchStream::HasRoom() const {
  std::lock_guard lock(mu_);
  return !closed_ && queued_bytes_ < hub_.opts_.stream_queue_bytes;
}

void WatchStream::EnqueueControl(const WatchResponse& resp) {
  Enqueue(WireResponse::Control(resp), true);
}

bool WatchStream::Enqueue(WireResponse&& resp, bool force, Deferred* deferred) {
  const size_t size = resp.size();
  std::unique_lock lock(mu_);
  if (closed_) return true;  // nobody listens any more
  if (!force && !queue_.empty() && queued_bytes_ + size > hub_.opts_.stream_queue_bytes) {
    return false;
  }
  // While a write is in flight, events for the watcher of the last queued response join that
  // response (as a catch-up response carries several revisions): under load a stream sends one
  // message per write instead of one per revision. Merged responses stay far below the fragment
  // size, so a watcher that asked for fragments never needs a merged one split.
  if (writing_ && !queue_.empty() && resp.mergeable() && queue_.back().mergeable() &&
      queue_.back().watch_id() == resp.watch_id() &&
      queue_.back().size() + size <= kMergedResponseBytes) {
    WireResponse& back = queue_.back();
    queued_bytes_ -= std::min(queued_bytes_, back.size());
    back.Merge(std::move(resp));
    queued_bytes_ += back.size();
    return true;
  }
  if (!writing_ && deferred == nullptr) {
    writing_ = true;
    lock.unlock();
    sink_->StartWrite(resp.Encode());
    return true;
  }
  queued_bytes_ += size;
  queue_.push_back(std::move(resp));
  if (!writing_) {
    // Deferred: the hub's sender thread starts the write (and meanwhile more events merge
    // into this response).
    writing_ = true;
    lock.unlock();
    if (auto self = weak_from_this().lock()) {
      deferred->push_back(std::move(self));
    } else {
      StartQueued();  // the stream is being destroyed: finish it here
    }
  }
  return true;
}

void WatchStream::StartQueued() { WriteDone(true); }

void WatchStream::WriteDone(bool ok) {
  std::unique_lock lock(mu_);
  if (!ok) {
    closed_ = true;
    queue_.clear();
    queued_bytes_ = 0;
  }
  if (closed_ || queue_.empty()) {
    writing_ = false;
    if (closed_ && !finished_) {
      finished_ = true;
      lock.unlock();
      sink_->Finish();
      return;
    }
    lock.unlock();
    if (ok) hub_.WakeCatchUpIfUnsynced();
    return;
  }
  WireResponse next = std::move(queue_.front());
  queue_.pop_front();
  queued_bytes_ -= std::min(queued_bytes_, next.size());
  bool room = queued_bytes_ < hub_.opts_.stream_queue_bytes / 2;
  lock.unlock();
  sink_->StartWrite(next.Encode());
  if (room) hub_.WakeCatchUpIfUnsynced();
}

void WatchStream::Close() {
  {
    std::lock_guard hub_lock(hub_.mu_);
    if (!closed_hub_) {
      closed_hub_ = true;
      for (auto& [id, w] : watchers_) hub_.RemoveWatcherLocked(w.get());
      watchers_.clear();
      hub_.streams_.erase(this);
    }
  }
  std::unique_lock lock(mu_);
  closed_ = true;
  queue_.clear();
  queued_bytes_ = 0;
  if (!writing_ && !finished_) {
    finished_ = true;
    lock.unlock();
    sink_->Finish();
  }
}

void WatchStream::RefuseCreate(const std::string& reason) {
  std::lock_guard hub_lock(hub_.mu_);
  if (closed_hub_) return;
  WatchResponse resp = hub_.NewResponse(-1, hub_.rev_);
  resp.set_created(true);
  resp.set_canceled(true);
  resp.set_cancel_reason(reason);
  EnqueueControl(resp);
}

void WatchStream::Create(const etcdserverpb::WatchCreateRequest& req) {
  auto w = std::make_unique<Watcher>();
  w->serial = NextSerial();
  std::string key = req.key().empty() ? std::string(1, '\0') : req.key();
  w->range = mvcc::KeyRange::FromRequest(key, req.range_end());
  for (int f : req.filters()) {
    if (f == etcdserverpb::WatchCreateRequest::NOPUT) w->no_put = true;
    if (f == etcdserverpb::WatchCreateRequest::NODELETE) w->no_delete = true;
  }
  w->prev_kv = req.prev_kv();
  w->progress_notify = req.progress_notify();
  w->fragment = req.fragment();
  w->stream = this;
  // A new watcher has not been told anything yet: the first progress tick reports to it.
  w->events_since_tick = false;

  bool wake = false;
  {
    std::lock_guard hub_lock(hub_.mu_);
    if (closed_hub_) return;
    const int64_t wsrev = hub_.rev_;
    std::string err;
    int64_t id = req.watch_id();
    if (w->range.kind == mvcc::KeyRange::Kind::kRange && !(w->range.key < w->range.end)) {
      err = "mvcc: watcher range is empty";
    } else if (id != 0) {
      if (watchers_.count(id)) err = "mvcc: duplicate watch ID provided on the WatchStream";
    } else {
      while (watchers_.count(next_id_)) ++next_id_;
      id = next_id_++;
    }
    if (!err.empty()) {
      WatchResponse resp = hub_.NewResponse(-1, wsrev);
      resp.set_created(true);
      resp.set_canceled(true);
      resp.set_cancel_reason(err);
      EnqueueControl(resp);
      return;
    }
    w->id = id;
    const int64_t start = req.start_revision();
    w->synced = start > wsrev || start == 0;
    w->next_rev = w->synced ? std::max(wsrev + 1, start) : start;

    WatchResponse resp = hub_.NewResponse(id, wsrev);
    resp.set_created(true);
    EnqueueControl(resp);

    Watcher* raw = w.get();
    watchers_[id] = std::move(w);
    if (raw->synced) {
      hub_.synced_.insert(raw);
    } else {
      hub_.AddUnsyncedLocked(raw);
      wake = true;
    }
  }
  if (wake) hub_.WakeCatchUp();
}

void WatchStream::Cancel(int64_t watch_id) {
  std::lock_guard hub_lock(hub_.mu_);
  auto it = watchers_.find(watch_id);
  if (it == watchers_.end()) return;  // etcd answers nothing for an unknown ID
  hub_.RemoveWatcherLocked(it->second.get());
  watchers_.erase(it);
  WatchResponse resp = hub_.NewResponse(watch_id, hub_.rev_);
  resp.set_canceled(true);
  EnqueueControl(resp);
  hub_.MaybeSendDeferredProgressLocked(*this);
}

void WatchStream::RequestProgress() {
  std::lock_guard hub_lock(hub_.mu_);
  if (hub_.AllSyncedLocked(*this)) {
    EnqueueControl(hub_.NewResponse(-1, hub_.rev_));
  } else {
    // Answered once every watcher of the stream has caught up, so that the reported revision
    // is never ahead of an event still to be delivered.
    progress_pending_ = true;
  }
}

// ---------------------------------------------------------------------------------------------
// WatchHub

WatchHub::WatchHub(const mvcc::KvStore& store, WatchHubOptions opts)
    : store_(store), opts_(std::move(opts)), rev_(store.Rev()) {
  read_prev_ = [this](const mvccpb::Event& ev, int64_t rev) -> std::optional<mvccpb::KeyValue> {
    Result<mvccpb::KeyValue> kv = store_.ReadVersion(ev.kv().key(), rev);
    if (kv.ok()) return std::move(*kv);
    // As etcd does when its read of prev_kv fails, the event goes out without it.
    log::Error("watch: cannot read the version an event replaced",
               {log::F("revision", rev), log::F("error", kv.status())});
    return std::nullopt;
  };
}

WatchHub::~WatchHub() { Stop(); }

void WatchHub::Start() {
  {
    std::lock_guard lock(send_mu_);
    if (!sender_.joinable()) {
      send_stop_ = false;
      sender_ = common::NamedThread("watch-sender", [this] { SenderLoop(); });
    }
  }
  std::lock_guard lock(cu_mu_);
  if (catchup_.joinable()) return;
  stop_ = false;
  catchup_ = common::NamedThread("watch-catchup", [this] { CatchUpLoop(); });
}

void WatchHub::Stop() {
  {
    std::lock_guard lock(cu_mu_);
    stop_ = true;
  }
  cu_cv_.notify_all();
  if (catchup_.joinable()) catchup_.join();
  {
    std::lock_guard lock(send_mu_);
    send_stop_ = true;  // later deferred starts run inline
  }
  send_cv_.notify_all();
  if (sender_.joinable()) sender_.join();
}

void WatchHub::ScheduleStarts(WatchStream::Deferred streams) {
  if (streams.empty()) return;
  bool handed_over = false;
  {
    std::lock_guard lock(send_mu_);
    if (!send_stop_ && sender_.joinable()) {
      to_start_.insert(to_start_.end(), std::make_move_iterator(streams.begin()),
                       std::make_move_iterator(streams.end()));
      handed_over = true;
    }
  }
  if (handed_over) {
    send_cv_.notify_one();
    return;
  }
  for (auto& s : streams) s->StartQueued();  // the sender is not running
}

void WatchHub::SenderLoop() {
  std::unique_lock lock(send_mu_);
  while (true) {
    send_cv_.wait(lock, [&] { return send_stop_ || !to_start_.empty(); });
    if (to_start_.empty()) return;  // stopping, and every scheduled start has run
    WatchStream::Deferred batch;
    batch.swap(to_start_);
    lock.unlock();
    {
      // The writes' event loops are woken once each, after the whole batch, not once per
      // stream as each loop drains faster than this thread posts.
      common::DeferredWakes wakes;
      for (auto& s : batch) s->StartQueued();
    }
    batch.clear();  // streams may be released here, outside send_mu_
    lock.lock();
  }
}

std::shared_ptr<WatchStream> WatchHub::NewStream(WatchSink* sink) {
  std::shared_ptr<WatchStream> s(new WatchStream(*this, sink));
  std::lock_guard lock(mu_);
  streams_.insert(s.get());
  return s;
}

int64_t WatchHub::rev() const {
  std::lock_guard lock(mu_);
  return rev_;
}

size_t WatchHub::WatcherCount() const {
  std::lock_guard lock(mu_);
  return synced_.size() + unsynced_.size();
}

size_t WatchHub::UnsyncedCount() const {
  std::lock_guard lock(mu_);
  return unsynced_.size();
}

size_t WatchHub::StreamCount() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

etcdserverpb::ResponseHeader WatchHub::NewHeader(int64_t rev) const {
  etcdserverpb::ResponseHeader h;
  if (opts_.fill_header) opts_.fill_header(&h);
  h.set_revision(rev);
  return h;
}

WatchResponse WatchHub::NewResponse(int64_t watch_id, int64_t rev) const {
  WatchResponse r;
  *r.mutable_header() = NewHeader(rev);
  r.set_watch_id(watch_id);
  return r;
}

std::vector<WireResponse> WatchHub::ResponsesFor(const Watcher& w,
                                                 std::vector<EventEncodings>& events,
                                                 const etcdserverpb::ResponseHeader& header) const {
  // etcd reads an event's previous version at mod_revision - 1 when it sends the event; once
  // that revision is compacted the event goes out without prev_kv, whether or not the old
  // version is still physically present here.
  const int64_t compact_rev = w.prev_kv ? store_.CompactRev() : 0;
  std::vector<EncodedEvent> picked;
  size_t bytes = 0;
  for (EventEncodings& e : events) {
    const mvccpb::Event& ev = e.event();
    if (!w.range.Contains(ev.kv().key())) continue;
    if (ev.type() == mvccpb::Event::PUT ? w.no_put : w.no_delete) continue;
    picked.push_back(e.Get(w.prev_kv && ev.kv().mod_revision() - 1 >= compact_rev));
    bytes += picked.back()->size();
  }
  std::vector<WireResponse> out;
  if (picked.empty()) return out;
  if (!w.fragment || picked.size() < 2 ||
      WireResponse::Events(header, w.id, false, {}).size() + bytes < opts_.fragment_bytes) {
    out.push_back(WireResponse::Events(header, w.id, false, std::move(picked)));
    return out;
  }
  // Split into fragments: each holds as many events as fit (at least one); all but the last
  // are marked fragment=true and the client reassembles them.
  const size_t head = WireResponse::Events(header, w.id, true, {}).size();
  std::vector<EncodedEvent> cur;
  size_t cur_bytes = head;
  for (EncodedEvent& e : picked) {
    if (!cur.empty() && cur_bytes + e->size() >= opts_.fragment_bytes) {
      out.push_back(WireResponse::Events(header, w.id, true, std::move(cur)));
      cur.clear();
      cur_bytes = head;
    }
    cur_bytes += e->size();
    cur.push_back(std::move(e));
  }
  out.push_back(WireResponse::Events(header, w.id, false, std::move(cur)));
  return out;
}

void WatchHub::RemoveWatcherLocked(Watcher* w) {
  synced_.erase(w);
  EraseUnsyncedLocked(w);
}

bool WatchHub::AllSyncedLocked(const WatchStream& s) const {
  for (const auto& [id, w] : s.watchers_) {
    if (!w->synced && !w->compacted) return false;
  }
  return true;
}

void WatchHub::MaybeSendDeferredProgressLocked(WatchStream& s) {
  if (!s.progress_pending_ || !AllSyncedLocked(s)) return;
  s.progress_pending_ = false;
  s.EnqueueControl(NewResponse(-1, rev_));
}

void WatchHub::Notify(const std::vector<mvcc::RevisionEvents>& changes, int64_t rev) {
  bool wake = false;
  WatchStream::Deferred deferred;  // idle streams that got a response: one sender wake-up
  {
    std::lock_guard lock(mu_);
    std::vector<EventEncodings> events;
    std::vector<Watcher*> victims;
    for (const auto& rc : changes) {
      // Each event is encoded at most twice (with and without prev_kv), whatever the number of
      // watchers it goes to; the header is the same for all of them.
      events.clear();
      for (size_t i = 0; i < rc.events.size(); ++i) {
        events.emplace_back(rc.events[i], rc.unread_prev_rev(i), &read_prev_);
      }
      const etcdserverpb::ResponseHeader header = NewHeader(rc.rev);
      victims.clear();
      for (Watcher* w : synced_) {
        if (rc.rev < w->next_rev) continue;  // a watcher that starts in the future
        auto responses = ResponsesFor(*w, events, header);
        if (!responses.empty()) {
          if (!w->stream->HasRoom()) {
            victims.push_back(w);  // keep it in history instead of in memory
            continue;
          }
          for (auto& r : responses) w->stream->Enqueue(std::move(r), true, &deferred);
          w->events_since_tick = true;
        }
        w->next_rev = rc.rev + 1;
      }
      for (Watcher* w : victims) {
        synced_.erase(w);
        w->synced = false;
        w->next_rev = rc.rev;
        AddUnsyncedLocked(w);
        wake = true;
      }
    }
    rev_ = std::max(rev_, rev);
    if (!unsynced_.empty()) wake = true;
  }
  ScheduleStarts(std::move(deferred));
  if (wake) WakeCatchUp();
}

void WatchHub::Resync(int64_t rev) {
  {
    std::lock_guard lock(mu_);
    for (Watcher* w : synced_) {
      w->synced = false;
      AddUnsyncedLocked(w);
    }
    synced_.clear();
    rev_ = rev;
  }
  WakeCatchUp();
}

void WatchHub::ProgressTick() {
  std::lock_guard lock(mu_);
  for (WatchStream* s : streams_) {
    for (auto& [id, w] : s->watchers_) {
      if (!w->progress_notify || w->compacted) continue;
      if (w->synced && !w->events_since_tick) s->EnqueueControl(NewResponse(id, rev_));
      w->events_since_tick = false;
    }
  }
}

void WatchHub::AddUnsyncedLocked(Watcher* w) {
  unsynced_.insert(w);
  unsynced_size_ = unsynced_.size();
}

void WatchHub::EraseUnsyncedLocked(Watcher* w) {
  unsynced_.erase(w);
  unsynced_size_ = unsynced_.size();
}

void WatchHub::WakeCatchUpIfUnsynced() {
  if (unsynced_size_.load(std::memory_order_relaxed) > 0) WakeCatchUp();
}

void WatchHub::WakeCatchUp() {
  {
    std::lock_guard lock(cu_mu_);
    cu_wake_ = true;
  }
  cu_cv_.notify_one();
}

bool WatchHub::CatchUpOnce() {
  struct Job {
    uint64_t serial;
    Watcher* w;
    int64_t from;
    mvcc::KeyRange range;  // copied: the watcher may go away while history is read unlocked
    std::shared_ptr<WatchStream> stream;
  };
  std::vector<Job> jobs;
  int64_t to;
  {
    std::lock_guard lock(mu_);
    to = rev_;
    for (Watcher* w : unsynced_) {
      if (!w->stream->HasRoom()) continue;
      jobs.push_back({w->serial, w, w->next_rev, w->range, w->stream->shared_from_this()});
    }
  }
  bool progressed = false;
  for (const Job& job : jobs) {
    // Like etcd, one catch-up response holds the events of at most `catchup_revisions`
    // revisions that touch the watcher's range (however many other revisions lie between
    // them); history is read in chunks of about `catchup_events` events.
    std::vector<mvccpb::Event> events;
    int64_t next_rev = job.from;
    int64_t revisions = 0;
    bool compacted = false;
    int64_t compact_rev = -1;
    Status failure = Status::Ok();
    while (next_rev <= to) {
      auto hist = mvcc::ReadHistory(store_, next_rev, to, opts_.catchup_events);
      if (!hist.ok()) {
        failure = hist.status();
        break;
      }
      if (hist->compacted) {
        // Reported now if nothing was collected; otherwise on the next pass.
        compacted = events.empty();
        compact_rev = hist->compact_rev;
        break;
      }
      bool full = false;
      for (auto& rc : hist->revisions) {
        bool touches = false;
        for (const auto& ev : rc.events) {
          if (job.range.Contains(ev.kv().key())) {
            touches = true;
            break;
          }
        }
        if (touches &&
            revisions >= static_cast<int64_t>(std::max<size_t>(1, opts_.catchup_revisions))) {
          full = true;
          next_rev = rc.rev;
          break;
        }
        if (touches) {
          ++revisions;
          for (auto& ev : rc.events) {
            if (job.range.Contains(ev.kv().key())) events.push_back(std::move(ev));
          }
        }
        next_rev = rc.rev + 1;
      }
      if (full) break;
      next_rev = std::max(next_rev, hist->next_rev);
    }

    std::lock_guard lock(mu_);
    // The watcher may have been cancelled (and its memory reused) while we read.
    if (!unsynced_.count(job.w) || job.w->serial != job.serial || job.w->next_rev != job.from) {
      continue;
    }
    Watcher* w = job.w;
    WatchStream& s = *w->stream;
    if (!failure.ok()) {
      log::Error("watch catch-up failed", {log::F("error", failure)});
      if (events.empty()) continue;  // otherwise deliver what was read; retried from there
    }
    progressed = true;
    if (compacted) {
      WatchResponse resp = NewResponse(w->id, 0);
      resp.set_compact_revision(compact_rev);
      resp.set_canceled(true);
      s.EnqueueControl(resp);
      w->compacted = true;
      EraseUnsyncedLocked(w);
      MaybeSendDeferredProgressLocked(s);
      continue;
    }
    std::vector<EventEncodings> encodings(events.begin(), events.end());
    for (auto& r : ResponsesFor(*w, encodings, NewHeader(to))) s.Enqueue(std::move(r), true);
    if (!events.empty()) w->events_since_tick = true;
    w->next_rev = next_rev;
    if (w->next_rev > rev_) {
      EraseUnsyncedLocked(w);
      w->synced = true;
      synced_.insert(w);
      MaybeSendDeferredProgressLocked(s);
    }
  }
  return progressed;
}

void WatchHub::CatchUpLoop() {
  while (true) {
    {
      std::unique_lock lock(cu_mu_);
      if (stop_) return;
      cu_wake_ = false;
    }
    bool progressed = CatchUpOnce();
    bool pending = UnsyncedCount() > 0;
    std::unique_lock lock(cu_mu_);
    if (stop_) return;
    if (progressed && pending) continue;
    cu_cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_ || cu_wake_; });
  }
}

}  // namespace etcdw::member

// The watch machinery: streams carrying many watchers, delivery of applied changes to them,
// replay from history, progress notifications and cancellation, with etcd's semantics.
//
// A watcher is either *synced* (it has received every change up to the hub's revision; new
// changes are pushed to it as they are applied) or *unsynced* (it must first catch up from the
// revision log; the catch-up thread does that). A synced watcher whose stream cannot take more
// data (its send queue is over the limit: the client reads slowly) becomes unsynced instead of
// buffering, so slow watchers never block the apply thread and memory per stream is bounded.
//
// Locking: the hub mutex guards watcher state and registries; each stream's own mutex guards its
// send queue. Order: hub mutex, then a stream mutex.
//
// Threads: a stream's requests (Create, Cancel, RequestProgress, WriteDone, Close) come from the
// client's thread (the client API's event loop); Notify from the apply thread; ProgressTick from
// the member's ticker; the hub runs a catch-up thread (watchers replaying history) and a sender
// thread (starting the writes Notify deferred). Each of them may start a write on a stream's
// sink, so a sink is called on any of these threads, never two at once for one stream.
#pragma once

#include <absl/base/thread_annotations.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/member/watch_wire.h"
#include "etcdw/mvcc/key_range.h"
#include "etcdw/mvcc/kv_store.h"

namespace etcdw::member {

// Where a stream's responses are written (the gRPC stream). The stream guarantees one write in
// flight at a time, and Finish only when no write is in flight, exactly once. Both may be called
// on any of the hub's and the stream's callers' threads (see above), possibly with the hub mutex
// held: they must not block and must not call the stream or the hub before returning.
class WatchSink {
 public:
  virtual ~WatchSink() = default;
  // Writes one serialized etcdserverpb.WatchResponse; the sink calls the stream's WriteDone()
  // when it is written, later and from its own thread.
  virtual void StartWrite(std::string wire) = 0;
  virtual void Finish() = 0;
};

class WatchHub;
struct Watcher;

class WatchStream : public std::enable_shared_from_this<WatchStream> {
 public:
  // Requests from the client.
  void Create(const etcdserverpb::WatchCreateRequest& req);
  // A create request refused before any watcher exists (auth): answered in order with what
  // etcd sends, watch ID -1, created and canceled, and `reason`.
  void RefuseCreate(const std::string& reason);
  void Cancel(int64_t watch_id);
  void RequestProgress();
  // The sink finished the current write (ok=false: the stream is broken).
  void WriteDone(bool ok);
  // The RPC ended: drop every watcher; the sink is finished once no write is in flight.
  void Close();

  ~WatchStream();

 private:
  friend class WatchHub;
  WatchStream(WatchHub& hub, WatchSink* sink);

  // Queues a response. `force` ignores the size limit (control messages, catch-up batches the
  // caller sized). Returns false when the response did not fit. `deferred`: an idle stream's
  // write is not started by the caller (the apply thread must not spend its time in writes to
  // every watcher) but added to this list, which the caller hands to the hub's sender thread
  // (WatchHub::ScheduleStarts) once it has queued the whole batch.
  using Deferred = std::vector<std::shared_ptr<WatchStream>>;
  bool Enqueue(WireResponse&& resp, bool force, Deferred* deferred = nullptr);
  // Queues a response without events, whatever the queue holds.
  void EnqueueControl(const etcdserverpb::WatchResponse& resp);
  // Starts the write of the first queued response (a deferred start), or finishes the stream if
  // it was closed meanwhile.
  void StartQueued();
  // The largest response Enqueue builds by merging queued event responses.
  static constexpr size_t kMergedResponseBytes = size_t{256} << 10;
  bool HasRoom() const;

  WatchHub& hub_;
  WatchSink* sink_;

  // Guarded by the hub's mutex (hub_.mu_; the hub is incomplete here, so no annotation).
  std::map<int64_t, std::unique_ptr<Watcher>> watchers_;
  int64_t next_id_ = 0;
  bool progress_pending_ = false;
  bool closed_hub_ = false;

  mutable std::mutex mu_;
  std::deque<WireResponse> queue_ ABSL_GUARDED_BY(mu_);
  size_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

struct WatchHubOptions {
  // Responses larger than this are split when the watcher asked for fragments (etcd:
  // max-request-bytes plus 512 KiB of gRPC overhead).
  size_t fragment_bytes = 1572864 + 512 * 1024;
  // A stream's send queue above this many bytes makes further changes wait in history.
  size_t stream_queue_bytes = size_t{4} << 20;
  // Events read from history per read while catching up.
  size_t catchup_events = 1000;
  // A catch-up response holds the events of at most this many revisions that touch the
  // watcher's range (etcd's watchBatchMaxRevs).
  size_t catchup_revisions = 1000;
  // Fills cluster_id, member_id and raft_term of response headers.
  std::function<void(etcdserverpb::ResponseHeader*)> fill_header;
};

class WatchHub {
 public:
  WatchHub(const mvcc::KvStore& store, WatchHubOptions opts);
  ~WatchHub();

  // Starts / stops the catch-up and sender threads.
  void Start();
  void Stop();

  std::shared_ptr<WatchStream> NewStream(WatchSink* sink);

  // Applied changes (apply thread, after commit). `rev` is the store revision after them.
  void Notify(const std::vector<mvcc::RevisionEvents>& changes, int64_t rev);
  // The store's state was replaced (a snapshot was installed): every watcher catches up again
  // from the new history (or learns it was compacted); `rev` is the new revision.
  void Resync(int64_t rev);
  // Sends a progress notification to every synced watcher that asked for them and received
  // no events since the previous tick.
  void ProgressTick();

  int64_t rev() const;
  size_t WatcherCount() const;
  size_t UnsyncedCount() const;
  size_t StreamCount() const;

 private:
  friend class WatchStream;
  etcdserverpb::ResponseHeader NewHeader(int64_t rev) const;
  etcdserverpb::WatchResponse NewResponse(int64_t watch_id, int64_t rev) const;
  // Builds the responses a watcher gets for one batch of events at `header` (filtered,
  // fragmented). The events' encodings are built on first use and shared between watchers.
  std::vector<WireResponse> ResponsesFor(const Watcher& w, std::vector<EventEncodings>& events,
                                         const etcdserverpb::ResponseHeader& header) const;
  void RemoveWatcherLocked(Watcher* w);
  void MaybeSendDeferredProgressLocked(WatchStream& s);
  bool AllSyncedLocked(const WatchStream& s) const;
  void CatchUpLoop();
  // One catch-up pass; returns true if any watcher made progress.
  bool CatchUpOnce();
  void WakeCatchUp();
  // Hands deferred write starts to the sender thread with one wake-up (or starts them here when
  // it is not running).
  void ScheduleStarts(WatchStream::Deferred streams);
  void SenderLoop();
  // A stream got room to send: only watchers waiting in history can use it. Skips the wake-up
  // (a futex call and a pass over the hub under its mutex) when there are none.
  void WakeCatchUpIfUnsynced();
  void AddUnsyncedLocked(Watcher* w);
  void EraseUnsyncedLocked(Watcher* w);

  const mvcc::KvStore& store_;
  WatchHubOptions opts_;
  // Reads the versions puts replaced without reading them, for prev_kv watchers (apply thread,
  // from Notify: the compaction revision cannot move meanwhile).
  PrevReader read_prev_;

  // The hub mutex: also guards each stream's watcher registry and each Watcher.
  mutable std::mutex mu_;
  int64_t rev_ ABSL_GUARDED_BY(mu_);
  std::set<Watcher*> synced_ ABSL_GUARDED_BY(mu_);
  std::set<Watcher*> unsynced_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> unsynced_size_{0};  // unsynced_.size(), readable without mu_
  std::set<WatchStream*> streams_ ABSL_GUARDED_BY(mu_);

  std::mutex cu_mu_;
  std::condition_variable cu_cv_;
  bool cu_wake_ ABSL_GUARDED_BY(cu_mu_) = false;
  bool stop_ ABSL_GUARDED_BY(cu_mu_) = false;
  std::thread catchup_;

  // The sender thread: starts deferred writes (see WatchStream::Enqueue).
  std::mutex send_mu_;
  std::condition_variable send_cv_;
  WatchStream::Deferred to_start_ ABSL_GUARDED_BY(send_mu_);
  bool send_stop_ ABSL_GUARDED_BY(send_mu_) = false;
  std::thread sender_;
};

}  // namespace etcdw::member

// How answers reach an event loop (rpc/event_loop.h) from the threads that produce them.
#pragma once

#include <absl/base/thread_annotations.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "etcdw/common/deferred_wakes.h"
#include "etcdw/common/status.h"
#include "method_table.h"
#include "tls_session.h"

namespace etcdw::client_api {

// An answer on its way back to the event loop: a unary call's, or a stream's message or end.
struct Answered {
  // kHttp1: a whole HTTP/1.1 response (`framed`), after which the connection closes.
  // kHttp2Plain: the HTTP/1.1 response (`framed`) to a non-gRPC HTTP/2 request, re-framed.
  enum Kind { kUnary, kStreamMessage, kStreamEnd, kHttp1, kHttp2Plain };
  Kind kind = kUnary;
  uint64_t conn = 0;
  int32_t stream = 0;
  Status st;
  std::string framed;
  Written written;  // kStreamMessage: optional
};

// A loop's inbox, written from any thread: answers, and connections the acceptor hands over.
// Shared with every pending call, so an answer arriving after the server stopped lands here
// harmlessly. Always held by a shared_ptr (a post's wake-up may be deferred: DeferredWakes).
struct Mailbox final : common::Wakeable, std::enable_shared_from_this<Mailbox> {
  // An accepted connection handed to a loop; `tls` set for an https listener's.
  struct Accepted {
    int fd = -1;
    std::shared_ptr<TlsContext> tls;
    bool metrics_only = false;  // from a listen-metrics-url: HTTP/1.1, /metrics and /health
  };
  struct Contents {
    std::vector<Answered> answers;
    std::vector<Accepted> connections;
  };
  std::mutex mu;
  Contents in ABSL_GUARDED_BY(mu);
  int efd = -1;                 // set before the loop starts
  std::thread::id loop_thread;  // set before the loop starts

  ~Mailbox() override {
    if (efd >= 0) close(efd);
  }
  void Wake() override {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(efd, &one, sizeof one);
  }
  void Post(Answered a) {
    bool wake;
    {
      std::lock_guard lock(mu);
      // One wake-up per batch; and the loop looks after every dispatch, so answers given on
      // its own thread need none.
      wake =
          in.answers.empty() && in.connections.empty() && std::this_thread::get_id() != loop_thread;
      in.answers.push_back(std::move(a));
    }
    if (wake) common::DeferredWakes::Wake(shared_from_this());
  }
  void PostConnection(Accepted a) {
    {
      std::lock_guard lock(mu);
      in.connections.push_back(std::move(a));
    }
    Wake();
  }
  // Whether anything waits: answers the loop's own thread posted while it was not dispatching
  // (a `written` callback in a flush) did not wake it.
  bool Pending() {
    std::lock_guard lock(mu);
    return !in.answers.empty() || !in.connections.empty();
  }
  Contents Take() {
    Contents out;
    std::lock_guard lock(mu);
    std::swap(out, in);
    return out;
  }
};

// A stream's answers, posted to its loop's mailbox.
class MailboxSink final : public StreamSink {
 public:
  MailboxSink(std::shared_ptr<Mailbox> mail, uint64_t conn, int32_t stream)
      : mail_(std::move(mail)), conn_(conn), stream_(stream) {}
  void Send(std::string framed, Written written) override {
    mail_->Post({Answered::kStreamMessage, conn_, stream_, Status::Ok(), std::move(framed),
                 std::move(written)});
  }
  void Finish(const Status& st) override {
    mail_->Post({Answered::kStreamEnd, conn_, stream_, st, {}});
  }

 private:
  std::shared_ptr<Mailbox> mail_;
  uint64_t conn_;
  int32_t stream_;
};

}  // namespace etcdw::client_api

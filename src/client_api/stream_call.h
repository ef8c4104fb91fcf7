// How a call of the client API answers: a unary call's Answer, and a stream's two halves
// (StreamSink towards the client, StreamCall from it).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"
#include "h2_connection.h"

namespace etcdw::client_api {

// Completes one call: OK with the framed response message, or an error (`framed` unused).
// Called exactly once, from any thread.
using Answer = std::function<void(const Status& st, std::string framed)>;

// How an open stream answers, from any thread: messages, then one end. Both are ignored once
// the stream is gone or ended.
class StreamSink {
 public:
  virtual ~StreamSink() = default;
  // `written` (optional) is told, on the connection's event loop, once the message is handed to
  // the transport or dropped (H2Connection::Written): a producer that waits for it before
  // sending more never holds more than one message per stream in memory.
  virtual void Send(std::string framed, Written written = nullptr) = 0;
  virtual void Finish(const Status& st) = 0;
};

// One open stream of a streaming method. Owned by its connection's event loop and called only
// there; work it hands to other threads reaches the client through its StreamSink.
class StreamCall {
 public:
  virtual ~StreamCall() = default;
  virtual void OnMessage(std::string_view payload) = 0;
  // The client sent its last message.
  virtual void OnHalfClose() = 0;
  // The stream is gone (ended, cancelled, or its connection closed): nothing follows.
  virtual void OnGone() {}
};

}  // namespace etcdw::client_api

// A byte stream to or from a peer: a TCP socket, or TLS over one. Every asynchronous operation
// completes on the socket's executor (a strand), and every handler given to a Stream must keep
// the Stream alive (hold its shared_ptr) until it runs: the TLS engine is touched even when an
// operation is aborted.
#pragma once

// clang-format off
#include <utility>  // first: Boost 1.74's asio uses std::exchange without including it
// clang-format on
#include <array>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <memory>
#include <optional>
#include <string>

namespace etcdw::peer_transport {

using Executor = boost::asio::any_io_executor;
using Tcp = boost::asio::ip::tcp;
using TlsStream = boost::asio::ssl::stream<Tcp::socket>;

class Stream {
 public:
  // Plain TCP over a connected socket.
  explicit Stream(Tcp::socket socket) : tcp_(std::move(socket)) {}
  // TLS over a connected socket; the TLS handshake is still to be done.
  Stream(Tcp::socket socket, boost::asio::ssl::context& ctx)
      : tls_(std::in_place, std::move(socket), ctx) {}

  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  bool is_tls() const { return tls_.has_value(); }
  TlsStream& tls() { return *tls_; }
  Tcp::socket& socket() { return tls_ ? tls_->next_layer() : *tcp_; }

  // Writes all of `buffers`.
  template <typename Buffers, typename Handler>
  void AsyncWrite(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      boost::asio::async_write(*tls_, buffers, std::forward<Handler>(handler));
    } else {
      boost::asio::async_write(*tcp_, buffers, std::forward<Handler>(handler));
    }
  }

  // Fills all of `buffers`.
  template <typename Buffers, typename Handler>
  void AsyncRead(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      boost::asio::async_read(*tls_, buffers, std::forward<Handler>(handler));
    } else {
      boost::asio::async_read(*tcp_, buffers, std::forward<Handler>(handler));
    }
  }

  // Reads what has arrived into `buffers` (at least one byte; waits for it).
  template <typename Buffers, typename Handler>
  void AsyncReadSome(const Buffers& buffers, Handler&& handler) {
    if (tls_) {
      tls_->async_read_some(buffers, std::forward<Handler>(handler));
    } else {
      tcp_->async_read_some(buffers, std::forward<Handler>(handler));
    }
  }

  // Closes the socket (no TLS close_notify); pending operations complete with an error.
  void Close() {
    boost::system::error_code ec;
    socket().shutdown(Tcp::socket::shutdown_both, ec);
    socket().close(ec);
  }

  // "ip:port" of the other end, or "unknown".
  std::string RemoteAddress() {
    boost::system::error_code ec;
    auto ep = socket().remote_endpoint(ec);
    if (ec) return "unknown";
    std::string host = ep.address().to_string();
    if (ep.address().is_v6()) host = "[" + host + "]";
    return host + ":" + std::to_string(ep.port());
  }

  // A scratch byte for reads whose content only matters as "something arrived".
  std::array<uint8_t, 1>& scratch() { return scratch_; }

 private:
  std::optional<Tcp::socket> tcp_;
  std::optional<TlsStream> tls_;
  std::array<uint8_t, 1> scratch_{};
};

}  // namespace etcdw::peer_transport

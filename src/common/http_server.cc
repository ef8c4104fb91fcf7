// HttpServer: Beast on an io_context run by `threads` threads. Each connection carries one
// request: read (bounded by read_timeout, TLS handshake included), run the handler, write
// (bounded by read_timeout again), close. A connection's operations run on its own strand, so
// they never overlap; different connections' handlers may run at the same time.
// clang-format off
#include <utility>  // first: Boost 1.74's asio uses std::exchange without including it
// clang-format on
#include <algorithm>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "etcdw/common/http.h"
#include "etcdw/common/thread_name.h"
#include "etcdw/common/tls_context.h"
#include "http_util.h"

namespace etcdw::common {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

bool IsLoopback(const asio::ip::address& a) {
  if (a.is_loopback()) return true;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return a.to_v6().to_v4().is_loopback();  // ::ffff:127.x.y.z
  }
  return false;
}

// One connection. `Stream` is Tcp::socket or ssl::stream<Tcp::socket>.
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(Stream stream, asio::ip::address remote, HttpServer::Handler* handler,
          const HttpServerOptions& opts)
      : stream_(std::move(stream)),
        timer_(stream_.get_executor()),
        remote_(std::move(remote)),
        handler_(handler),
        opts_(opts) {}

  // Starts serving the connection on its strand.
  void Run() {
    auto self = this->shared_from_this();
    asio::dispatch(stream_.get_executor(), [self] { self->Begin(); });
  }

 private:
  void Begin() {
    auto self = this->shared_from_this();
    ArmDeadline();
    if constexpr (std::is_same_v<Stream, Tcp::socket>) {
      Read();
    } else {
      stream_.async_handshake(ssl::stream_base::server, [self](const error_code& ec) {
        if (ec) return self->Close();
        self->Read();
      });
    }
  }

  Tcp::socket& socket() {
    if constexpr (std::is_same_v<Stream, Tcp::socket>) {
      return stream_;
    } else {
      return stream_.next_layer();
    }
  }

  // Drops the connection unless the current phase (reading the request, or writing the
  // response) ends within read_timeout. Arming again starts a new phase: an expiry of an earlier
  // one, even if already queued, is ignored (the handler's own time is not bounded).
  void ArmDeadline() {
    const uint64_t phase = ++phase_;
    timer_.expires_after(opts_.read_timeout);
    auto self = this->shared_from_this();
    timer_.async_wait([self, phase](const error_code& ec) {
      if (!ec && phase == self->phase_) self->Close();
    });
  }

  void Read() {
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    parser_->body_limit(opts_.max_body_bytes);
    auto self = this->shared_from_this();
    http::async_read(stream_, buffer_, *parser_,
                     [self](const error_code& ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(const error_code& ec) {
    if (ec) {
      if (ec == http::error::body_limit || ec == http::error::header_limit) {
        HttpResponse r;
        r.status = 413;
        r.body = "request too large\n";
        return Write(r);
      }
      if (ec == http::error::end_of_stream) return Close();
      HttpResponse r;
      r.status = 400;
      r.body = "malformed request: " + ec.message() + "\n";
      return Write(r);
    }
    auto& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    SplitTarget(req.target, &req.path, &req.query);
    req.body = std::move(msg.body());
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers.emplace(std::move(name), std::string(f.value()));
    }
    req.remote_address = remote_.to_string();
    req.remote_is_loopback = IsLoopback(remote_);
    if constexpr (!std::is_same_v<Stream, Tcp::socket>) {
      SSL* ssl = stream_.native_handle();
      X509* cert = SSL_get1_peer_certificate(ssl);
      req.client_cert_verified = cert != nullptr && SSL_get_verify_result(ssl) == X509_V_OK &&
                                 !opts_.client_ca_file.empty();
      if (cert) X509_free(cert);
    }
    HttpResponse resp;
    try {
      resp = (*handler_)(req);
    } catch (const std::exception& e) {
      resp = HttpResponse{};
      resp.status = 500;
      resp.body = std::string("internal error: ") + e.what() + "\n";
    }
    Write(resp);
  }

  void Write(const HttpResponse& r) {
    ArmDeadline();
    response_.emplace(static_cast<http::status>(r.status), 11);
    for (const auto& [k, v] : r.headers) response_->set(k, v);
    response_->set(http::field::connection, "close");
    response_->body() = r.body;
    response_->prepare_payload();
    auto self = this->shared_from_this();
    http::async_write(stream_, *response_, [self](const error_code&, size_t) { self->Finish(); });
  }

  void Finish() {
    if constexpr (std::is_same_v<Stream, Tcp::socket>) {
      error_code ignored;
      stream_.shutdown(Tcp::socket::shutdown_send, ignored);
      Close();
    } else {
      // A clean TLS close_notify, bounded by the timer still running.
      auto self = this->shared_from_this();
      stream_.async_shutdown([self](const error_code&) { self->Close(); });
    }
  }

  void Close() {
    error_code ignored;
    ++phase_;
    timer_.cancel();
    socket().close(ignored);
  }

  Stream stream_;
  asio::steady_timer timer_;
  uint64_t phase_ = 0;  // see ArmDeadline
  asio::ip::address remote_;
  HttpServer::Handler* handler_;
  const HttpServerOptions& opts_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> response_;
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& opts, Handler handler)
      : opts_(opts), handler_(std::move(handler)), acceptor_(io_) {}

  Status Init(int* bound_port) {
    const std::string where = "http server on " +
                              (opts_.host.empty() ? std::string("*") : opts_.host) + ":" +
                              std::to_string(opts_.port);
    if (!opts_.cert_file.empty() || !opts_.key_file.empty()) {
      if (Status st = InitTls(); !st.ok()) return st.WithContext(where);
    }
    error_code ec;
    asio::ip::address addr = asio::ip::address_v4::any();
    if (!opts_.host.empty()) {
      addr = asio::ip::make_address(opts_.host, ec);
      if (ec) return InvalidArgument(where + ": not an IP address: " + opts_.host);
    }
    Tcp::endpoint ep(addr, static_cast<uint16_t>(opts_.port));
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return Unavailable(where + ": " + ec.message());
    *bound_port = acceptor_.local_endpoint().port();
    Accept();
    for (int i = 0; i < std::max(1, opts_.threads); ++i) {
      threads_.push_back(NamedThread("http-server", [this] { io_.run(); }));
    }
    return Status::Ok();
  }

  void Stop() {
    if (threads_.empty()) return;
    asio::post(io_, [this] {
      error_code ignored;
      acceptor_.close(ignored);
      io_.stop();
    });
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

  bool tls() const { return tls_.has_value(); }

 private:
  Status InitTls() {
    if (opts_.cert_file.empty() || opts_.key_file.empty()) {
      return InvalidArgument("TLS needs both a certificate and a key file");
    }
    TlsContextOptions t;
    t.side = TlsContextOptions::Side::kServer;
    t.cert_file = opts_.cert_file;
    t.key_file = opts_.key_file;
    t.session_id_context = "etcdw-http";
    if (!opts_.client_ca_file.empty()) {
      // Ask for a certificate but never fail the handshake over it: the verdict is recorded
      // (SSL_get_verify_result) and left to the handler.
      t.ca_file = opts_.client_ca_file;
      t.ca_setting = "CA bundle";
      t.client_certs = TlsContextOptions::ClientCerts::kRequest;
    }
    ETCDW_ASSIGN_OR_RETURN(SslCtxPtr ctx, NewTlsContext(t));
    tls_.emplace(ctx.release());  // the Asio context owns it from here
    return Status::Ok();
  }

  void Accept() {
    // Each connection's socket (and so its timer and handlers) gets a strand of its own.
    acceptor_.async_accept(asio::make_strand(io_),
                           [this](const error_code& ec, Tcp::socket socket) {
                             if (ec == asio::error::operation_aborted || !acceptor_.is_open())
                               return;
                             if (!ec) {
                               error_code rec;
                               auto remote = socket.remote_endpoint(rec);
                               if (!rec) {
                                 if (tls_) {
                                   std::make_shared<Session<ssl::stream<Tcp::socket>>>(
                                       ssl::stream<Tcp::socket>(std::move(socket), *tls_),
                                       remote.address(), &handler_, opts_)
                                       ->Run();
                                 } else {
                                   std::make_shared<Session<Tcp::socket>>(
                                       std::move(socket), remote.address(), &handler_, opts_)
                                       ->Run();
                                 }
                               }
                             }
                             Accept();
                           });
  }

  HttpServerOptions opts_;
  Handler handler_;
  // Declared before io_: sessions still queued in io_ are destroyed with it and must not
  // outlive the TLS context.
  std::optional<ssl::context> tls_;
  asio::io_context io_;
  Tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
};

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                      Handler handler) {
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->impl_ = std::make_unique<Impl>(options, std::move(handler));
  if (Status st = s->impl_->Init(&s->port_); !st.ok()) return st;
  s->tls_ = s->impl_->tls();
  return s;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  if (impl_) impl_->Stop();
}

}  // namespace etcdw::common

// HttpClient: each request runs on its own io_context in the calling thread, in slices of at
// most 50 ms so that the deadline and the cancel flag are honoured whatever the peer does.
// clang-format off
#include <utility>  // first: Boost 1.74's asio uses std::exchange without including it
// clang-format on
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <optional>

#include "etcdw/common/http.h"
#include "etcdw/common/version.h"
#include "http_util.h"

namespace etcdw::common {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

Result<std::pair<std::string, int>> SplitHostPort(const std::string& host_port) {
  size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("\"" + host_port + "\": missing port (want host:port)");
  }
  std::string host = host_port.substr(0, colon);
  std::string port_text = host_port.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  int port = 0;
  bool digits = !port_text.empty() && port_text.size() <= 5;
  for (char c : port_text) digits &= c >= '0' && c <= '9';
  if (digits) port = std::stoi(port_text);
  if (!digits || port < 1 || port > 65535) {
    return InvalidArgument("\"" + host_port + "\": invalid port \"" + port_text + "\"");
  }
  return std::make_pair(host, port);
}

class HttpClient::Impl {
 public:
  std::optional<ssl::context> tls;
};

namespace {

// One request/response exchange over `Stream` (beast::tcp_stream or an ssl_stream over it).
template <typename Stream>
class Exchange {
 public:
  Exchange(Stream& stream, http::request<http::empty_body>& req, std::optional<Status>* result,
           HttpResponse* out)
      : stream_(stream), req_(req), result_(result), out_(out) {}

  void Run(const Tcp::resolver::results_type& endpoints) {
    beast::get_lowest_layer(stream_).async_connect(
        endpoints, [this](const error_code& ec, const Tcp::endpoint&) {
          if (ec) return Fail("connect", ec);
          if constexpr (std::is_same_v<Stream, beast::tcp_stream>) {
            Write();
          } else {
            stream_.async_handshake(ssl::stream_base::client, [this](const error_code& hec) {
              if (hec) return Fail("TLS handshake", hec);
              Write();
            });
          }
        });
  }

 private:
  void Write() {
    http::async_write(stream_, req_, [this](const error_code& ec, size_t) {
      if (ec) return Fail("write", ec);
      parser_.body_limit(64 << 20);
      http::async_read(stream_, buffer_, parser_, [this](const error_code& rec, size_t) {
        if (rec) return Fail("read response", rec);
        auto& msg = parser_.get();
        out_->status = static_cast<int>(msg.result_int());
        out_->body = std::move(msg.body());
        for (const auto& f : msg) {
          out_->headers[std::string(f.name_string())] = std::string(f.value());
        }
        *result_ = Status::Ok();
      });
    });
  }

  void Fail(const char* what, const error_code& ec) {
    std::string detail = ec.message();
    if (ec.category() == asio::error::get_ssl_category()) {
      if (char buf[256]; ERR_peek_error() != 0) {
        ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
        detail = buf;
      }
    }
    *result_ = Unavailable(std::string(what) + ": " + detail);
  }

  Stream& stream_;
  http::request<http::empty_body>& req_;
  std::optional<Status>* result_;  // set once the exchange is over
  HttpResponse* out_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
};

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::Create(const HttpClientOptions& options) {
  std::unique_ptr<HttpClient> c(new HttpClient());
  c->options_ = options;
  c->impl_ = std::make_unique<Impl>();
  if (options.tls) {
    if (options.ca_file.empty())
      return InvalidArgument("TLS needs a CA bundle to verify the server");
    c->impl_->tls.emplace(ssl::context::tls_client);
    ssl::context& ctx = *c->impl_->tls;
    if (Status st = ConfigureTlsBase(ctx); !st.ok()) return st;
    if (Status st = LoadCaBundle(ctx, options.ca_file); !st.ok()) return st;
    if (!options.cert_file.empty() || !options.key_file.empty()) {
      if (Status st = LoadCertificateAndKey(ctx, options.cert_file, options.key_file); !st.ok()) {
        return st;
      }
    }
    ctx.set_verify_mode(ssl::verify_peer);
  }
  return c;
}

HttpClient::~HttpClient() = default;

Result<HttpResponse> HttpClient::Request(const std::string& method, const std::string& host_port,
                                         const std::string& target,
                                         const std::atomic<bool>* cancel) {
  auto hp = SplitHostPort(host_port);
  if (!hp.ok()) return hp.status();
  // As Go's dialer: an empty host is the local machine.
  const std::string host = hp->first.empty() ? "127.0.0.1" : hp->first;
  const std::string port = std::to_string(hp->second);

  asio::io_context io;
  error_code ec;
  Tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return Unavailable("resolve \"" + host + "\": " + ec.message());

  http::request<http::empty_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, hp->first.empty() ? "localhost:" + port : host_port);
  req.set(http::field::user_agent, std::string("etcd-wrapper/") + kVersion);
  req.set(http::field::connection, "close");
  if (req.method() == http::verb::post || req.method() == http::verb::put) {
    req.content_length(0);
  }

  std::optional<Status> result;
  HttpResponse out;

  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  std::optional<Exchange<beast::tcp_stream>> plain_exchange;
  std::optional<Exchange<beast::ssl_stream<beast::tcp_stream>>> secure_exchange;
  if (impl_->tls) {
    secure.emplace(io, *impl_->tls);
    const std::string& name = options_.server_name.empty() ? host : options_.server_name;
    error_code aec;
    asio::ip::make_address(name, aec);
    if (aec) SSL_set_tlsext_host_name(secure->native_handle(), name.c_str());  // SNI: names only
    secure->set_verify_callback(ssl::host_name_verification(name));
    secure_exchange.emplace(*secure, req, &result, &out);
    secure_exchange->Run(endpoints);
  } else {
    plain.emplace(io);
    plain_exchange.emplace(*plain, req, &result, &out);
    plain_exchange->Run(endpoints);
  }

  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (!result) {
    if (cancel && cancel->load()) return Status(Code::kCanceled, "request canceled");
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return Status(Code::kDeadlineExceeded,
                    "no response within " + std::to_string(options_.timeout.count()) + " ms");
    }
    io.run_for(std::min<std::chrono::steady_clock::duration>(std::chrono::milliseconds(50),
                                                             deadline - now));
    if (io.stopped() && !result) io.restart();
  }
  if (!result->ok()) return *result;
  return out;
}

}  // namespace etcdw::common

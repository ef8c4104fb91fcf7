// HttpClient: each request runs on its own io_context in the calling thread, in slices of at
// most 50 ms so that the deadline, the stall timeout and the cancel flag are honoured whatever
// the peer does. Bodies stream through the types of http_body.h.
// clang-format off
#include <utility>  // first: Boost 1.74's asio uses std::exchange without including it
// clang-format on
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "etcdw/common/http.h"
#include "etcdw/common/tls_context.h"
#include "etcdw/common/version.h"
#include "http_body.h"
#include "http_util.h"

namespace etcdw::common {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {
// ASCII case-insensitive equality (header names, host names).
bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] - 'A' + 'a') : b[i];
    if (x != y) return false;
  }
  return true;
}
}  // namespace

std::string HeaderValue(const HttpResponse& response, std::string_view name) {
  for (const auto& [k, v] : response.headers) {
    if (EqualsIgnoreCase(k, name)) return v;
  }
  return "";
}

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

using OutgoingRequest = http::request<detail::SourceBody>;
using ResponseParser = http::response_parser<detail::SinkBody>;

// One request/response exchange over `Stream` (beast::tcp_stream or an ssl_stream over it).
template <typename Stream>
class Exchange {
 public:
  Exchange(Stream& stream, OutgoingRequest& req, ResponseParser& parser,
           std::optional<Status>* result, HttpResponse* out)
      : stream_(stream), req_(req), parser_(parser), result_(result), out_(out) {}

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
      if (ec && !req_.body().read_error.empty()) {
        *result_ = Internal(req_.body().read_error);
        return;
      }
      // A server may answer before it has read the whole body (an error it detected from the
      // header) and close: its answer explains the failed write better than EPIPE does.
      Read(ec);
    });
  }

  void Read(const error_code& write_error) {
    http::async_read(stream_, buffer_, parser_, [this, write_error](const error_code& ec, size_t) {
      if (ec) return Fail(write_error ? "write" : "read response", write_error ? write_error : ec);
      auto& msg = parser_.get();
      out_->status = static_cast<int>(msg.result_int());
      out_->body = std::move(msg.body().text);
      for (const auto& f : msg) {
        out_->headers[std::string(f.name_string())] = std::string(f.value());
      }
      *result_ = Status::Ok();
    });
  }

  void Fail(const char* what, const error_code& ec) {
    const std::string& file_error = parser_.get().body().file_error;
    if (!file_error.empty()) {
      *result_ = Internal(file_error);
      return;
    }
    std::string detail = ec.message();
    Code code = Code::kUnavailable;
    if (ec.category() == asio::error::get_ssl_category()) {
      if (ERR_GET_REASON(ec.value()) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
        code = Code::kUnauthenticated;  // trying again will not help
      }
      if (char buf[256]; ERR_peek_error() != 0) {
        ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
        detail = buf;
      }
    }
    *result_ = Status(code, std::string(what) + ": " + detail);
  }

  Stream& stream_;
  OutgoingRequest& req_;
  ResponseParser& parser_;
  std::optional<Status>* result_;  // set once the exchange is over
  HttpResponse* out_;
  beast::flat_buffer buffer_;
};

// Closes a file descriptor when it goes out of scope.
class FdGuard {
 public:
  explicit FdGuard(int* fd) : fd_(fd) {}
  ~FdGuard() {
    if (*fd_ >= 0) ::close(*fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;

 private:
  int* fd_;
};

// RFC 6761 §6.3: names under "localhost." are loopback names, answered without DNS.
bool UnderLocalhost(std::string_view host) {
  constexpr std::string_view kSuffix = ".localhost";
  while (!host.empty() && host.back() == '.') host.remove_suffix(1);
  return host.size() > kSuffix.size() &&
         EqualsIgnoreCase(host.substr(host.size() - kSuffix.size()), kSuffix);
}

}  // namespace

Result<std::unique_ptr<HttpClient>> HttpClient::Create(const HttpClientOptions& options) {
  std::unique_ptr<HttpClient> c(new HttpClient());
  c->options_ = options;
  c->impl_ = std::make_unique<Impl>();
  if (options.tls) {
    if (!options.insecure_skip_verify && options.ca_file.empty() && options.ca_pem.empty() &&
        !options.system_roots) {
      return InvalidArgument("TLS needs a CA bundle to verify the server");
    }
    TlsContextOptions t;
    t.side = TlsContextOptions::Side::kClient;
    t.ca_file = options.ca_file;
    t.ca_setting = "CA bundle";
    t.ca_pem = options.ca_pem;
    t.system_roots = options.system_roots;
    t.cert_file = options.cert_file;
    t.key_file = options.key_file;
    t.cert_pem = options.cert_pem;
    t.key_pem = options.key_pem;
    t.verify_server = !options.insecure_skip_verify;
    t.tls13_only = options.min_tls13;
    ETCDW_ASSIGN_OR_RETURN(SslCtxPtr ctx, NewTlsContext(t));
    c->impl_->tls.emplace(ctx.release());  // the Asio context owns it from here
  }
  return c;
}

HttpClient::~HttpClient() = default;

Result<HttpResponse> HttpClient::Request(const std::string& method, const std::string& host_port,
                                         const std::string& target,
                                         const std::atomic<bool>* cancel) {
  HttpClientRequest r;
  r.method = method;
  r.host_port = host_port;
  r.target = target;
  r.cancel = cancel;
  return Send(r);
}

Result<HttpResponse> HttpClient::Send(const HttpClientRequest& request) {
  auto hp = SplitHostPort(request.host_port);
  if (!hp.ok()) return hp.status();
  // As Go's dialer: an empty host is the local machine.
  const std::string host = hp->first.empty() ? "127.0.0.1" : hp->first;
  const std::string dial_host = UnderLocalhost(host) ? "127.0.0.1" : host;
  const std::string port = std::to_string(hp->second);

  int body_fd = -1;
  FdGuard body_fd_guard(&body_fd);
  if (!request.body_file.empty()) {
    if (request.body_offset < 0 || request.body_length < 0) {
      return InvalidArgument("body range of \"" + request.body_file + "\" is negative");
    }
    body_fd = ::open(request.body_file.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (body_fd < 0 || ::fstat(body_fd, &st) != 0) {
      return Internal("open \"" + request.body_file + "\": " + std::strerror(errno));
    }
    if (request.body_offset + request.body_length > st.st_size) {
      return InvalidArgument("\"" + request.body_file + "\" holds " + std::to_string(st.st_size) +
                             " bytes, the body needs " +
                             std::to_string(request.body_offset + request.body_length));
    }
  }

  asio::io_context io;
  error_code ec;
  Tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(dial_host, port, ec);
  if (ec) return Unavailable("resolve \"" + dial_host + "\": " + ec.message());

  uint64_t progress = 0;
  OutgoingRequest req;
  req.version(11);
  req.target(request.target);
  if (http::verb v = http::string_to_verb(request.method); v != http::verb::unknown) {
    req.method(v);
  } else {
    req.method_string(request.method);
  }
  req.set(http::field::host, hp->first.empty() ? "localhost:" + port : request.host_port);
  req.set(http::field::user_agent, std::string("etcd-wrapper/") + kVersion);
  req.set(http::field::connection, "close");
  for (const auto& [name, value] : request.headers) {
    if (EqualsIgnoreCase(name, "host")) {
      req.set(http::field::host, value);
    } else {
      req.insert(name, value);
    }
  }
  detail::SourceBody::value_type& body = req.body();
  body.progress = &progress;
  if (body_fd >= 0) {
    body.fd = body_fd;
    body.file_name = request.body_file;
    body.offset = static_cast<uint64_t>(request.body_offset);
    body.length = static_cast<uint64_t>(request.body_length);
  } else {
    body.text = request.body;
  }
  const uint64_t body_size = detail::SourceBody::size(body);
  if (body_size > 0 || req.method() == http::verb::post || req.method() == http::verb::put ||
      req.method() == http::verb::patch) {
    req.content_length(body_size);
  }

  ResponseParser parser;
  // No limit here: SinkBody enforces the limit of in-memory bodies. Not boost::none: Boost
  // 1.74's parser compares a Content-Length with the empty optional as greater and fails the
  // answer with body_limit when its head arrives without its body.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (req.method() == http::verb::head) parser.skip(true);
  detail::SinkBody::value_type& sink = parser.get().body();
  sink.file_path = request.response_file;
  sink.progress = &progress;
  FdGuard response_fd_guard(&sink.fd);

  std::optional<Status> result;
  HttpResponse out;

  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  std::optional<Exchange<beast::tcp_stream>> plain_exchange;
  std::optional<Exchange<beast::ssl_stream<beast::tcp_stream>>> secure_exchange;
  if (impl_->tls) {
    secure.emplace(io, *impl_->tls);
    const std::string& name = options_.server_name.empty() ? host : options_.server_name;
    // SNI (names only) and the name or address the certificate must be valid for.
    if (Status st = ExpectServerName(secure->native_handle(), name); !st.ok()) return st;
    secure_exchange.emplace(*secure, req, parser, &result, &out);
    secure_exchange->Run(endpoints);
  } else {
    plain.emplace(io);
    plain_exchange.emplace(*plain, req, parser, &result, &out);
    plain_exchange->Run(endpoints);
  }

  using Clock = std::chrono::steady_clock;
  const bool stall_mode = request.stall_timeout.count() > 0;
  const std::chrono::milliseconds limit =
      stall_mode ? request.stall_timeout
                 : (request.timeout.count() > 0 ? request.timeout : options_.timeout);
  auto since = Clock::now();  // stall mode: the last time a byte moved
  uint64_t seen = 0;
  while (!result) {
    if (request.cancel && request.cancel->load()) {
      return Status(Code::kCanceled, "request canceled");
    }
    auto now = Clock::now();
    if (stall_mode && progress != seen) {
      seen = progress;
      since = now;
    }
    const auto deadline = since + limit;
    if (now >= deadline) {
      return Status(Code::kDeadlineExceeded,
                    stall_mode ? "no data moved for " + std::to_string(limit.count()) + " ms"
                               : "no response within " + std::to_string(limit.count()) + " ms");
    }
    io.run_for(std::min<Clock::duration>(std::chrono::milliseconds(50), deadline - now));
    if (io.stopped() && !result) io.restart();
  }
  if (!result->ok()) return *result;
  if (!request.response_file.empty() && out.status >= 200 && out.status < 300 && sink.fd < 0) {
    // An empty body never reaches SinkBody: the file must still end up empty.
    sink.fd = ::open(request.response_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (sink.fd < 0) {
      return Internal("open \"" + request.response_file + "\": " + std::strerror(errno));
    }
  }
  if (sink.fd >= 0) {
    int fd = sink.fd;
    sink.fd = -1;
    if (::close(fd) != 0) {
      return Internal("close \"" + request.response_file + "\": " + std::strerror(errno));
    }
  }
  return out;
}

}  // namespace etcdw::common

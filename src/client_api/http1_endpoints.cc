#include "http1_endpoints.h"

#include <cctype>
#include <ctime>
#include <memory>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/flags.h"
#include "etcdw/common/version.h"
#include "etcdw/member/server_metrics.h"
#include "gateway.h"
#include "health_checks.h"
#include "method_table.h"

namespace etcdw::client_api {

namespace {

// "Thu, 26 Nov 2026 11:27:08 GMT" (RFC 9110's IMF-fixdate), as Go's server sends it.
std::string HttpDate() {
  const time_t now = time(nullptr);
  tm t{};
  gmtime_r(&now, &t);
  char buf[64];
  strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &t);
  return buf;
}

// An answer laid out as Go's server writes etcd's: the handler's headers sorted by name (with
// `cors`, etcd's CORS headers, which its client port's handlers add from its default --cors
// "*"), then Date and Content-Length, then a Content-Type Go sniffed from the body when the
// handler set none (`sniffed`).
// `chunked`: the body as one chunk and grpc-gateway's trailer (its gRPC error answers).
std::string Response(bool cors, int code, std::string_view reason, std::string_view sorted_headers,
                     std::string_view body, std::string_view sniffed = "", bool chunked = false) {
  std::string r = "HTTP/1.1 " + std::to_string(code) + " " + std::string(reason) + "\r\n";
  if (cors) {
    r += "Access-Control-Allow-Headers: accept, content-type, authorization\r\n";
    r += "Access-Control-Allow-Methods: POST, GET, OPTIONS, PUT, DELETE\r\n";
    r += "Access-Control-Allow-Origin: *\r\n";
  }
  r += sorted_headers;
  r += "Date: " + HttpDate() + "\r\n";
  if (chunked) {
    char size[32];
    snprintf(size, sizeof size, "%zx", body.size());
    r += "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    r += std::string(size) + "\r\n" + std::string(body) + "\r\n";
    r += "0\r\nGrpc-Trailer-Content-Type: application/grpc\r\n\r\n";
    return r;
  }
  r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  if (!sniffed.empty()) r += "Content-Type: " + std::string(sniffed) + "\r\n";
  r += "Connection: close\r\n\r\n";
  r += body;
  return r;
}

constexpr std::string_view kText = "text/plain; charset=utf-8";
// What Go's http.Error sets: plain text, not to be sniffed.
constexpr std::string_view kErrorHeaders =
    "Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n";

// What Prometheus's Go handler names the text format it writes.
constexpr std::string_view kMetricsHeaders =
    "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n";

}  // namespace

std::optional<Protocol> SniffProtocol(std::string_view first_bytes) {
  const size_t n = std::min(first_bytes.size(), kHttp2Preface.size());
  if (first_bytes.substr(0, n) != kHttp2Preface.substr(0, n)) return Protocol::kHttp1;
  // No HTTP/1 method starts with "PRI "; what starts like the preface is HTTP/2 (nghttp2 then
  // checks the rest of it).
  if (n >= 4) return Protocol::kHttp2;
  return std::nullopt;
}

namespace {

// What Go's server writes itself for a request it cannot take, then closes: the status line,
// plain-text headers without Date or Content-Length, and `why` again as the body.
std::string GoServerError(std::string_view why) {
  return "HTTP/1.1 " + std::string(why) +
         "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n" +
         std::string(why);
}

}  // namespace

std::string Http1ParseError(Http1Parse::Result why) {
  if (why == Http1Parse::kHeadTooLarge) return GoServerError("431 Request Header Fields Too Large");
  if (why == Http1Parse::kUnsupportedTransferEncoding) {
    return "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain; charset=utf-8\r\n"
           "Connection: close\r\n\r\nUnsupported transfer encoding";
  }
  // etcd reads any body; ours are bounded (Http1Context::MaxBody).
  if (why == Http1Parse::kBodyTooLarge) return GoServerError("413 Request Entity Too Large");
  return GoServerError("400 Bad Request");
}

std::string Http1HostError(bool several) {
  // A badRequestError of Go's server: its text is in the status line and the body.
  return GoServerError(several ? "400 Bad Request"
                               : "400 Bad Request: missing required Host header");
}

std::string Http1TimeoutError(std::chrono::milliseconds timeout) {
  return GoServerError("408 Request Timeout: the request was not received within " +
                       common::FormatGoDuration(timeout));
}

namespace {

// Removes the header line `line` (with its CRLF) from the head `head`; whether it was there.
bool RemoveHeaderLine(std::string* head, std::string_view line) {
  const size_t at = head->find(line);
  if (at == std::string::npos) return false;
  head->erase(at, line.size());
  return true;
}

// The data of the chunked body `body` (our own chunks: well-formed), trailers left out.
std::string Dechunked(std::string_view body) {
  std::string out;
  while (true) {
    const size_t line_end = body.find("\r\n");
    if (line_end == std::string_view::npos) break;
    const size_t n = std::stoul(std::string(body.substr(0, line_end)), nullptr, 16);
    if (n == 0 || body.size() < line_end + 2 + n) break;
    out.append(body.substr(line_end + 2, n));
    body.remove_prefix(line_end + 2 + n + 2);
  }
  return out;
}

}  // namespace

bool Http1Framing::Adapt(std::string* response, bool head_only) const {
  const size_t head_end = response->find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  std::string head = response->substr(0, head_end + 2);
  std::string body = response->substr(head_end + 4);
  constexpr std::string_view kClose = "Connection: close\r\n";
  bool stays = false;
  if (!http10) {
    stays = keep_alive;
    if (stays) RemoveHeaderLine(&head, kClose);
  } else {
    head.replace(0, 8, "HTTP/1.0");
    if (RemoveHeaderLine(&head, "Transfer-Encoding: chunked\r\n")) {
      // No chunks in HTTP/1.0: the data as it is, the end of the connection ending it.
      RemoveHeaderLine(&head, kClose);
      if (!head_only) body = Dechunked(body);
    } else if (keep_alive) {
      const size_t at = head.find(kClose);
      if (at != std::string::npos) head.replace(at, kClose.size(), "Connection: keep-alive\r\n");
      stays = true;
    } else {
      RemoveHeaderLine(&head, kClose);
    }
  }
  *response = head + "\r\n" + body;
  return stays;
}

namespace {

std::string_view Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 412:
      return "Precondition Failed";
    case 429:
      return "Too Many Requests";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Internal Server Error";
  }
}

}  // namespace

std::string GatewayHttpResponse(const GatewayAnswer& a) {
  switch (a.kind) {
    case GatewayAnswer::kMessage:
      return Response(true, 200, "OK",
                      "Content-Type: application/json\r\n"
                      "Grpc-Metadata-Content-Type: application/grpc\r\n",
                      a.body);
    case GatewayAnswer::kGrpcError:
      return Response(true, a.code, Reason(a.code),
                      "Content-Type: application/json\r\nTrailer: Grpc-Trailer-Content-Type\r\n",
                      a.body, "", /*chunked=*/true);
    case GatewayAnswer::kParseError:
      return Response(true, a.code, Reason(a.code), "Content-Type: application/json\r\n", a.body);
    case GatewayAnswer::kNotFound:
    case GatewayAnswer::kNotAllowed:
      break;
  }
  return Response(true, a.code, Reason(a.code), kErrorHeaders, a.body);
}

std::string GatewayStreamHead(int code, bool answered) {
  // The stream's gRPC headers are forwarded once a message came with them.
  std::string r = Response(true, code, Reason(code),
                           answered ? "Content-Type: application/json\r\n"
                                      "Grpc-Metadata-Content-Type: application/grpc\r\n"
                                    : "Content-Type: application/json\r\n",
                           "", "", /*chunked=*/true);
  return r.substr(0, r.find("\r\n\r\n") + 4);  // the head alone
}

std::string Http1Chunk(std::string_view data) {
  if (data.empty()) return "";
  char size[32];
  snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + std::string(data) + "\r\n";
}

SplitResponse SplitHttp1Response(std::string_view response) {
  SplitResponse out;
  const size_t head_end = response.find("\r\n\r\n");
  std::string_view head = response.substr(0, head_end);
  std::string_view body =
      head_end == std::string_view::npos ? std::string_view() : response.substr(head_end + 4);
  size_t eol = head.find("\r\n");
  out.status = std::string(head.substr(9, 3));  // "HTTP/1.1 200 OK"
  bool chunked = false;
  std::string date;
  std::string length;
  while (eol != std::string_view::npos) {
    head.remove_prefix(eol + 2);
    eol = head.find("\r\n");
    const std::string_view line = head.substr(0, eol);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string name(line.substr(0, colon));
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::string value(line.substr(colon + 1));
    value.erase(0, value.find_first_not_of(' '));
    if (name == "transfer-encoding") chunked = true;
    if (name == "date") {
      date = std::move(value);
    } else if (name == "content-length") {
      length = std::move(value);
    } else if (name != "connection" && name != "transfer-encoding" && name != "trailer") {
      out.headers.emplace_back(std::move(name), std::move(value));
    }
  }
  // Go's HTTP/2 server writes the length it knows and the date last.
  if (!length.empty()) out.headers.emplace_back("content-length", std::move(length));
  if (!date.empty()) out.headers.emplace_back("date", std::move(date));
  if (!chunked) {
    out.body = std::string(body);
    return out;
  }
  while (true) {  // our own chunks: well-formed
    const size_t line_end = body.find("\r\n");
    if (line_end == std::string_view::npos) break;
    const size_t n = std::stoul(std::string(body.substr(0, line_end)), nullptr, 16);
    if (n == 0) break;
    out.body.append(body.substr(line_end + 2, n));
    body.remove_prefix(line_end + 2 + n + 2);
  }
  return out;
}

void AnswerHttp1(const Http1Context& ctx, HttpPort port, const Http1Request& req,
                 std::function<void(std::string)> done) {
  member::EtcdServer& s = ctx.server;
  const bool cors = port == HttpPort::kClient;  // a handler of the client port adds them
  const std::string_view method = req.method;
  const std::string_view path = req.path;
  if (path == "/metrics") {  // any method, as Prometheus's handler
    return done(Response(cors, 200, "OK", kMetricsHeaders, member::MetricsText(s)));
  }
  if (cors && ctx.gateway && IsGatewayPath(path)) {
    return ServeGateway(
        ctx.methods, ctx.max_message_bytes, req,
        [done = std::move(done)](const GatewayAnswer& a) { done(GatewayHttpResponse(a)); });
  }
  const bool served = IsHealthPath(path) || (path == "/version" && port == HttpPort::kClient);
  if (!served) {
    return done(Response(cors, 404, "Not Found", kErrorHeaders, "404 page not found\n"));
  }
  if (method != "GET") {
    return done(Response(cors, 405, "Method Not Allowed",
                         "Allow: GET\r\n" + std::string(kErrorHeaders), "Method Not Allowed\n"));
  }
  if (path == "/version") {
    const std::string body = std::string(R"({"etcdserver":")") + kEtcdVersion +
                             R"(","etcdcluster":")" + kEtcdApiVersion + R"(.0"})";
    return done(Response(cors, 200, "OK", "Content-Type: application/json\r\n", body));
  }
  RunHealthEndpoint(
      MemberHealthProbe(s), path, req.query, [cors, done = std::move(done)](const HealthAnswer& a) {
        const std::string_view headers = a.plain ? kErrorHeaders : "";
        const std::string_view sniffed = a.plain ? "" : kText;
        done(a.code == 200 ? Response(cors, 200, "OK", headers, a.body, sniffed)
                           : Response(cors, 503, "Service Unavailable", headers, a.body));
      });
}

}  // namespace etcdw::client_api

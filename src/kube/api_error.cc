#include "api_error.h"

#include <nlohmann/json.hpp>

#include "etcdw/common/url.h"

namespace etcdw::kube {

namespace {

// Enough of a plain-text answer (a proxy's HTML page, "404 page not found") to recognise it.
constexpr size_t kMaxTextInMessage = 200;

std::string ReasonPhrase(int http_status) {
  switch (http_status) {
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
    case 409:
      return "Conflict";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "HTTP status " + std::to_string(http_status);
  }
}

}  // namespace

Code CodeForHttpStatus(int http_status, const std::string& reason) {
  switch (http_status) {
    case 400:
    case 422:
      return Code::kInvalidArgument;
    case 401:
      return Code::kUnauthenticated;
    case 403:
      return Code::kPermissionDenied;
    case 404:
      return Code::kNotFound;
    // A create of an object that exists is no conflict that a re-read resolves.
    case 409:
      return reason == "AlreadyExists" ? Code::kAlreadyExists : Code::kAborted;
    case 429:
      return Code::kUnavailable;
    default:
      break;
  }
  if (http_status >= 500) return Code::kUnavailable;
  if (http_status >= 400) return Code::kInvalidArgument;  // 405, 406, 413, 415: our request
  return Code::kUnknown;                                  // 1xx or 3xx: nothing we asked for
}

Status ApiError(const std::string& method, const std::string& path, int http_status,
                const std::string& body) {
  std::string message;
  std::string reason;
  const nlohmann::json status = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  // Any JSON may come back (a proxy's, another server's): a "kind" that is no string is no
  // Status object, never an exception.
  if (status.is_object() && status.contains("kind") && status["kind"] == "Status") {
    if (auto m = status.find("message"); m != status.end() && m->is_string()) message = *m;
    if (auto r = status.find("reason"); r != status.end() && r->is_string()) reason = *r;
  }
  if (message.empty()) {
    message = std::string(common::Trim(body));
    if (message.size() > kMaxTextInMessage) message = message.substr(0, kMaxTextInMessage) + "...";
  }
  if (message.empty()) message = ReasonPhrase(http_status);
  return Status(
      CodeForHttpStatus(http_status, reason),
      method + " " + path + ": " + message + " (HTTP " + std::to_string(http_status) + ")");
}

}  // namespace etcdw::kube

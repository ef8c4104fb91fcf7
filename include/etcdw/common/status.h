// Errors as values. A Status is a code plus a message; the codes are numerically equal to gRPC
// status codes so the client API writes them without a table, and the messages of client-visible
// errors are etcd's exact strings (see etcd_errors.h) because clients match on them.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace etcdw {

enum class Code : int {
  kOk = 0,
  kCanceled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

// gRPC's name of a code ("FailedPrecondition"), as grpc-go prints it.
const char* CodeName(Code c);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status WithContext(const std::string& context) const;

  bool operator==(const Status& o) const { return code_ == o.code_ && message_ == o.message_; }

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Convenience constructors for internal (non-etcd) errors.
inline Status InvalidArgument(std::string m) { return {Code::kInvalidArgument, std::move(m)}; }
inline Status Internal(std::string m) { return {Code::kInternal, std::move(m)}; }
inline Status NotFound(std::string m) { return {Code::kNotFound, std::move(m)}; }
inline Status Unavailable(std::string m) { return {Code::kUnavailable, std::move(m)}; }
inline Status DataLoss(std::string m) { return {Code::kDataLoss, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {Code::kFailedPrecondition, std::move(m)};
}

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an OK status carries no value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace etcdw

// Evaluates `expr` (a Status); returns it from the enclosing function when not OK.
#define ETCDW_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::etcdw::Status etcdw_status_ = (expr);        \
    if (!etcdw_status_.ok()) return etcdw_status_; \
  } while (0)

#define ETCDW_CONCAT_INNER_(a, b) a##b
#define ETCDW_CONCAT_(a, b) ETCDW_CONCAT_INNER_(a, b)
// Declares `lhs` from a Result expression, or returns its Status when not OK.
#define ETCDW_ASSIGN_OR_RETURN(lhs, expr)                   \
  auto ETCDW_CONCAT_(etcdw_result_, __LINE__) = (expr);     \
  if (!ETCDW_CONCAT_(etcdw_result_, __LINE__).ok())         \
    return ETCDW_CONCAT_(etcdw_result_, __LINE__).status(); \
  lhs = std::move(ETCDW_CONCAT_(etcdw_result_, __LINE__)).value()

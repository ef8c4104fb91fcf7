#include "etcdw/common/status.h"

namespace etcdw {

const char* CodeName(Code c) {
  switch (c) {
    case Code::kOk:
      return "OK";
    case Code::kCanceled:
      return "Canceled";
    case Code::kUnknown:
      return "Unknown";
    case Code::kInvalidArgument:
      return "InvalidArgument";
    case Code::kDeadlineExceeded:
      return "DeadlineExceeded";
    case Code::kNotFound:
      return "NotFound";
    case Code::kAlreadyExists:
      return "AlreadyExists";
    case Code::kPermissionDenied:
      return "PermissionDenied";
    case Code::kResourceExhausted:
      return "ResourceExhausted";
    case Code::kFailedPrecondition:
      return "FailedPrecondition";
    case Code::kAborted:
      return "Aborted";
    case Code::kOutOfRange:
      return "OutOfRange";
    case Code::kUnimplemented:
      return "Unimplemented";
    case Code::kInternal:
      return "Internal";
    case Code::kUnavailable:
      return "Unavailable";
    case Code::kDataLoss:
      return "DataLoss";
    case Code::kUnauthenticated:
      return "Unauthenticated";
  }
  return "Code?";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace etcdw

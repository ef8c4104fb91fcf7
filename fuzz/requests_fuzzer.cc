// Feeds the checks a KV request passes before it is proposed (mvcc/txn_check.cc, etcd's v3rpc
// checks: CheckRangeRequest, CheckPutRequest, CheckDeleteRequest, CheckTxnRequest) arbitrary
// messages, as the client port hands them over after protobuf parsing. Beyond not crashing, it
// checks that:
// - a request is accepted or refused with one of the etcd errors its check may return, code and
//   message exactly as etcd_errors.h has them;
// - the refusals a simple reading of the rules predicts happen: an empty key (EmptyKey), a
//   value or lease with ignore_value or ignore_lease (ValueProvided, LeaseProvided), more
//   operations than the budget at the top level (TooManyOps), an empty operation, and the same
//   key put twice or put inside a deleted range at the top level (DuplicateKey);
// - an accepted request, serialized and parsed again, is accepted again; IsTxnReadOnly and
//   IsTxnSerializable agree with the top-level operations.
// Input: byte 0 % 4 chooses Range, Put, DeleteRange or Txn; byte 1 % 8 is the transaction's
// operation budget (max_txn_ops; etcd's default is 128, small ones reach TooManyOps); the rest
// is the message (ParseFromArray).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <set>
#include <string>

#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/status.h"
#include "etcdw/mvcc/txn.h"

namespace {

namespace errors = etcdw::errors;
namespace pb = etcdserverpb;
using etcdw::Status;

[[noreturn]] void Fail(const char* what, const Status& st = Status::Ok()) {
  std::fprintf(stderr, "requests_fuzzer: %s (%d: %s)\n", what, static_cast<int>(st.code()),
               st.message().c_str());
  std::abort();
}

// The status is Ok or exactly one of `allowed`.
void ExpectOneOf(const Status& st, std::initializer_list<Status> allowed) {
  if (st.ok()) return;
  for (const Status& e : allowed) {
    if (st.code() == e.code() && st.message() == e.message()) return;
  }
  Fail("a refusal that is none of the check's etcd errors", st);
}

void ExpectRefused(const Status& st, const Status& want, const char* why) {
  if (st.code() != want.code() || st.message() != want.message()) Fail(why, st);
}

Status CheckRange(const pb::RangeRequest& r) {
  const Status st = etcdw::mvcc::CheckRangeRequest(r);
  ExpectOneOf(st, {errors::EmptyKey()});
  if (r.key().empty()) ExpectRefused(st, errors::EmptyKey(), "an empty key was accepted");
  return st;
}

Status CheckPut(const pb::PutRequest& r) {
  const Status st = etcdw::mvcc::CheckPutRequest(r);
  ExpectOneOf(st, {errors::EmptyKey(), errors::ValueProvided(), errors::LeaseProvided()});
  if (r.key().empty()) {
    ExpectRefused(st, errors::EmptyKey(), "an empty key was accepted");
  } else if (r.ignore_value() && !r.value().empty()) {
    ExpectRefused(st, errors::ValueProvided(), "a value with ignore_value was accepted");
  } else if (r.ignore_lease() && r.lease() != 0) {
    ExpectRefused(st, errors::LeaseProvided(), "a lease with ignore_lease was accepted");
  } else if (!st.ok()) {
    Fail("a valid put was refused", st);
  }
  return st;
}

Status CheckDelete(const pb::DeleteRangeRequest& r) {
  const Status st = etcdw::mvcc::CheckDeleteRequest(r);
  ExpectOneOf(st, {errors::EmptyKey()});
  if (r.key().empty()) ExpectRefused(st, errors::EmptyKey(), "an empty key was accepted");
  return st;
}

// Whether `key` lies in what the delete removes for etcd's overlap check: its key, or
// [key, range_end) (etcd's checkIntervals takes a range_end of "\0" as that text too).
bool Deletes(const pb::DeleteRangeRequest& d, const std::string& key) {
  if (d.range_end().empty()) return key == d.key();
  return d.key() <= key && key < d.range_end();
}

Status CheckTxn(const pb::TxnRequest& r, int64_t max_ops) {
  const Status st = etcdw::mvcc::CheckTxnRequest(r, max_ops);
  ExpectOneOf(st, {errors::EmptyKey(), errors::ValueProvided(), errors::LeaseProvided(),
                   errors::TooManyOps(), errors::DuplicateKey(), errors::KeyNotFound()});
  const auto ops = std::max({r.compare_size(), r.success_size(), r.failure_size()});
  if (ops > max_ops) ExpectRefused(st, errors::TooManyOps(), "too many operations accepted");
  if (!st.ok()) return st;
  for (const auto& c : r.compare()) {
    if (c.key().empty()) Fail("a compare of an empty key was accepted");
  }
  bool read_only = true, serializable = true;
  for (const auto* branch : {&r.success(), &r.failure()}) {
    std::set<std::string> puts;
    for (const pb::RequestOp& op : *branch) {
      const bool range = op.request_case() == pb::RequestOp::kRequestRange;
      read_only &= range;
      serializable &= range && op.request_range().serializable();
      switch (op.request_case()) {
        case pb::RequestOp::kRequestRange:
          if (!CheckRange(op.request_range()).ok()) Fail("a bad range in an accepted txn");
          break;
        case pb::RequestOp::kRequestPut:
          if (!CheckPut(op.request_put()).ok()) Fail("a bad put in an accepted txn");
          if (!puts.insert(op.request_put().key()).second) Fail("a key put twice was accepted");
          break;
        case pb::RequestOp::kRequestDeleteRange:
          if (!CheckDelete(op.request_delete_range()).ok()) Fail("a bad delete in an accepted txn");
          break;
        case pb::RequestOp::kRequestTxn:
          break;  // its budget is what the outer level left: checked by the product only
        case pb::RequestOp::REQUEST_NOT_SET:
          Fail("an empty operation was accepted");
      }
    }
    for (const pb::RequestOp& op : *branch) {
      if (op.request_case() != pb::RequestOp::kRequestDeleteRange) continue;
      for (const std::string& key : puts) {
        if (Deletes(op.request_delete_range(), key)) Fail("a put in a deleted range was accepted");
      }
    }
  }
  if (etcdw::mvcc::IsTxnReadOnly(r) != read_only) Fail("IsTxnReadOnly disagrees");
  if (etcdw::mvcc::IsTxnSerializable(r) != serializable) Fail("IsTxnSerializable disagrees");
  return st;
}

// Parses the message, checks it, and checks an accepted one again after a round trip.
template <typename Message, typename Check>
void Drive(const uint8_t* data, size_t size, const Check& check) {
  Message m;
  if (!m.ParseFromArray(data, static_cast<int>(size))) return;
  if (!check(m).ok()) return;
  Message again;
  if (!again.ParseFromString(m.SerializeAsString())) Fail("an accepted request does not parse");
  const Status st = check(again);
  if (!st.ok()) Fail("an accepted request is refused after a round trip", st);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const int64_t max_ops = data[1] % 8;
  const uint8_t* msg = data + 2;
  const size_t len = size - 2;
  switch (data[0] % 4) {
    case 0:
      Drive<pb::RangeRequest>(msg, len, CheckRange);
      break;
    case 1:
      Drive<pb::PutRequest>(msg, len, CheckPut);
      break;
    case 2:
      Drive<pb::DeleteRangeRequest>(msg, len, CheckDelete);
      break;
    default:
      Drive<pb::TxnRequest>(msg, len,
                            [max_ops](const pb::TxnRequest& r) { return CheckTxn(r, max_ops); });
      break;
  }
  return 0;
}

#include "diff_fixture.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace etcdw::testing {

std::string Outcome::ToString() const {
  if (code != grpc::StatusCode::OK) {
    return "error code=" + std::to_string(static_cast<int>(code)) + " message=\"" + message + "\"";
  }
  return "ok " + response;
}

void NormalizeHeaders(google::protobuf::Message* m) {
  const auto* desc = m->GetDescriptor();
  const auto* refl = m->GetReflection();
  if (desc->full_name() == "etcdserverpb.ResponseHeader") {
    auto* h = static_cast<etcdserverpb::ResponseHeader*>(m);
    h->clear_cluster_id();
    h->clear_member_id();
    h->clear_raft_term();
    return;
  }
  for (int i = 0; i < desc->field_count(); ++i) {
    const auto* f = desc->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (f->is_repeated()) {
      for (int j = 0; j < refl->FieldSize(*m, f); ++j) {
        NormalizeHeaders(refl->MutableRepeatedMessage(m, f, j));
      }
    } else if (refl->HasField(*m, f)) {
      NormalizeHeaders(refl->MutableMessage(m, f));
    }
  }
}

std::string Normalized(const google::protobuf::Message& m) {
  std::unique_ptr<google::protobuf::Message> copy(m.New());
  copy->CopyFrom(m);
  NormalizeHeaders(copy.get());
  std::string out;
  google::protobuf::TextFormat::Printer p;
  p.SetSingleLineMode(true);
  p.PrintToString(*copy, &out);
  return out;
}

void DiffTest::StartBoth(const Settings& extra) {
  etcd_ = std::make_unique<Member>(Member::Kind::kEtcd);
  ours_ = std::make_unique<Member>(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(etcd_->Start(extra)) << "etcd did not start:\n" << etcd_->log();
  ASSERT_TRUE(ours_->Start(extra)) << "etcd-wrapper did not start:\n" << ours_->log();
}

void DiffTest::TearDown() {
  if (HasFailure() && ours_) {
    std::string log = ours_->log();
    if (log.size() > 4000) log = log.substr(log.size() - 4000);
    std::cerr << "---- etcd-wrapper log (tail) ----\n" << log << "\n";
  }
  etcd_.reset();
  ours_.reset();
}

Outcome DiffTest::Put(const std::string& k, const std::string& v, int64_t lease, bool prev_kv) {
  etcdserverpb::PutRequest r;
  r.set_key(k);
  r.set_value(v);
  r.set_lease(lease);
  r.set_prev_kv(prev_kv);
  return Same<etcdserverpb::PutResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::PutResponse* out) {
        return c.kv->Put(ctx, r, out);
      },
      "put " + k);
}

Outcome DiffTest::Range(const etcdserverpb::RangeRequest& r) {
  return Same<etcdserverpb::RangeResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::RangeResponse* out) {
        return c.kv->Range(ctx, r, out);
      },
      "range " + r.ShortDebugString());
}

Outcome DiffTest::Get(const std::string& k, const std::string& end, int64_t rev) {
  etcdserverpb::RangeRequest r;
  r.set_key(k);
  r.set_range_end(end);
  r.set_revision(rev);
  return Range(r);
}

Outcome DiffTest::Delete(const std::string& k, const std::string& end, bool prev_kv) {
  etcdserverpb::DeleteRangeRequest r;
  r.set_key(k);
  r.set_range_end(end);
  r.set_prev_kv(prev_kv);
  return Same<etcdserverpb::DeleteRangeResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::DeleteRangeResponse* out) {
        return c.kv->DeleteRange(ctx, r, out);
      },
      "delete " + k);
}

Outcome DiffTest::Txn(const etcdserverpb::TxnRequest& r) {
  return Same<etcdserverpb::TxnResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::TxnResponse* out) {
        return c.kv->Txn(ctx, r, out);
      },
      "txn " + r.ShortDebugString());
}

Outcome DiffTest::Compact(int64_t rev, bool physical) {
  etcdserverpb::CompactionRequest r;
  r.set_revision(rev);
  r.set_physical(physical);
  return Same<etcdserverpb::CompactionResponse>(
      [&](Client& c, grpc::ClientContext* ctx, etcdserverpb::CompactionResponse* out) {
        return c.kv->Compact(ctx, r, out);
      },
      "compact " + std::to_string(rev));
}

// ---------------------------------------------------------------------------------------------

struct WatchSession::Impl {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>>
      stream;
  std::thread reader;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<etcdserverpb::WatchResponse> queue;
  bool done = false;
};

WatchSession::WatchSession(Member& m) : impl_(std::make_unique<Impl>()) {
  impl_->stream = m.client().watch->Watch(&impl_->ctx);
  Impl* impl = impl_.get();
  impl_->reader = std::thread([impl] {
    etcdserverpb::WatchResponse resp;
    while (impl->stream->Read(&resp)) {
      std::lock_guard lock(impl->mu);
      impl->queue.push_back(resp);
      impl->cv.notify_all();
    }
    std::lock_guard lock(impl->mu);
    impl->done = true;
    impl->cv.notify_all();
  });
}

WatchSession::~WatchSession() {
  impl_->ctx.TryCancel();
  impl_->reader.join();
  impl_->stream->Finish();
}

bool WatchSession::Send(const etcdserverpb::WatchRequest& req) { return impl_->stream->Write(req); }

void WatchSession::CloseSend() { impl_->stream->WritesDone(); }

std::optional<etcdserverpb::WatchResponse> WatchSession::Next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  if (!impl_->cv.wait_for(lock, timeout, [&] { return !impl_->queue.empty() || impl_->done; })) {
    return std::nullopt;
  }
  if (impl_->queue.empty()) return std::nullopt;
  auto r = std::move(impl_->queue.front());
  impl_->queue.pop_front();
  return r;
}

std::vector<etcdserverpb::WatchResponse> WatchSession::Drain(std::chrono::milliseconds quiet) {
  std::vector<etcdserverpb::WatchResponse> out;
  while (auto r = Next(quiet)) out.push_back(std::move(*r));
  return out;
}

etcdserverpb::WatchRequest CreateWatch(const std::string& key, const std::string& end,
                                       int64_t start_rev, bool prev_kv) {
  etcdserverpb::WatchRequest req;
  auto* c = req.mutable_create_request();
  c->set_key(key);
  c->set_range_end(end);
  c->set_start_revision(start_rev);
  c->set_prev_kv(prev_kv);
  return req;
}

}  // namespace etcdw::testing

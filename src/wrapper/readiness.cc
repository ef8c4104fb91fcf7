#include "etcdw/wrapper/readiness.h"

#include <absl/base/thread_annotations.h>
#include <grpcpp/grpcpp.h>

#include <fstream>
#include <sstream>

#include "etcd/etcdserverpb/rpc.grpc.pb.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/thread_name.h"

namespace etcdw::wrapper {

namespace log = etcdw::log;

namespace {

Result<std::string> ReadPem(const std::string& what, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(what + " \"" + path + "\": cannot read: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN") == std::string::npos) {
    return InvalidArgument(what + " \"" + path + "\": no PEM data in the file");
  }
  return ss.str();
}

}  // namespace

class ReadinessProbe::Impl {
 public:
  Impl(const ReadinessOptions& o, std::shared_ptr<grpc::Channel> channel)
      : opts_(o), kv_(etcdserverpb::KV::NewStub(channel)), channel_(std::move(channel)) {}

  void Run() {
    while (true) {
      auto started = clock_.Now();
      pending_since_.store(NowNanos());
      std::string error = Check();
      pending_since_.store(0);
      bool ok = error.empty();
      bool was = ok_.exchange(ok);
      if (ok && !was) log::Info("etcd member is ready", {log::F("endpoint", opts_.endpoint)});
      if (!ok && (was || error != last_error_)) {
        log::Warn("etcd member is not ready",
                  {log::F("endpoint", opts_.endpoint), log::F("error", error)});
      }
      last_error_ = error;
      std::unique_lock lock(mu_);
      if (clock_.WaitUntil(lock, cv_, started + opts_.interval, [&] { return stopping_; })) return;
    }
  }

  bool Ready() const {
    if (!ok_.load()) return false;
    int64_t since = pending_since_.load();
    if (since == 0) return true;
    auto pending = std::chrono::nanoseconds(NowNanos() - since);
    return pending <= opts_.interval;
  }

  void Stop() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      if (current_) current_->TryCancel();  // do not wait out a pending check
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::thread thread_;

 private:
  // Never 0 (the value meaning "no check pending"): a steady clock is far from its epoch.
  int64_t NowNanos() const { return clock_.Now().time_since_epoch().count(); }

  // An empty string on success, else what failed.
  std::string Check() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + opts_.check_timeout);
    etcdserverpb::RangeRequest req;
    req.set_key("foo");
    etcdserverpb::RangeResponse resp;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return "stopping";
      current_ = &ctx;
    }
    grpc::Status st = kv_->Range(&ctx, req, &resp);
    {
      std::lock_guard lock(mu_);
      current_ = nullptr;
    }
    if (st.ok()) return "";
    return "code " + std::to_string(st.error_code()) + ": " + st.error_message();
  }

  ReadinessOptions opts_;
  const common::Clock& clock_ = *opts_.clock;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::shared_ptr<grpc::Channel> channel_;
  std::atomic<bool> ok_{false};
  std::atomic<int64_t> pending_since_{0};  // clock nanoseconds; 0: no check pending
  std::string last_error_;                 // the checking thread's
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ClientContext* current_ ABSL_GUARDED_BY(mu_) = nullptr;  // the pending check
};

Result<std::unique_ptr<ReadinessProbe>> ReadinessProbe::Start(const ReadinessOptions& o) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Reconnect quickly when the member comes back (the default backoff grows to 2 minutes).
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (o.tls) {
    grpc::SslCredentialsOptions ssl;
    auto ca = ReadPem("trusted-ca-file", o.ca_file);
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    if (!o.cert_file.empty() || !o.key_file.empty()) {
      auto cert = ReadPem("--etcd-client-cert-path", o.cert_file);
      if (!cert.ok()) return cert.status();
      auto key = ReadPem("--etcd-client-key-path", o.key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(ssl);
    if (!o.server_name.empty()) args.SetSslTargetNameOverride(o.server_name);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  auto channel = grpc::CreateCustomChannel(o.endpoint, creds, args);
  std::unique_ptr<ReadinessProbe> p(new ReadinessProbe());
  p->impl_ = std::make_unique<Impl>(o, std::move(channel));
  Impl* impl = p->impl_.get();
  impl->thread_ = common::NamedThread("readiness", [impl] { impl->Run(); });
  return p;
}

ReadinessProbe::~ReadinessProbe() {
  if (impl_) impl_->Stop();
}

bool ReadinessProbe::Ready() const { return impl_->Ready(); }

}  // namespace etcdw::wrapper

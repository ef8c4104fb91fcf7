#include "etcdw/sidecar/etcd_client.h"

#include <absl/base/thread_annotations.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace etcdw::sidecar {
namespace {

Status FromGrpc(const grpc::Status& st) {
  if (st.ok()) return Status::Ok();
  return Status(static_cast<Code>(st.error_code()), st.error_message());
}

void SetDeadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

Result<std::string> ReadFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument(flag + ": cannot read \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// TLS that accepts any server certificate, as Go's tls.Config{InsecureSkipVerify: true} does
// for gardener's client: neither the chain nor the host name is checked. The client
// certificate, if any, is still presented.
std::shared_ptr<grpc::ChannelCredentials> UnverifiedTlsCredentials(
    const grpc::SslCredentialsOptions& ssl) {
  namespace tls = grpc::experimental;
  tls::TlsChannelCredentialsOptions options;
  std::vector<tls::IdentityKeyCertPair> identity;
  if (!ssl.pem_cert_chain.empty()) identity.push_back({ssl.pem_private_key, ssl.pem_cert_chain});
  if (!ssl.pem_root_certs.empty() || !identity.empty()) {
    options.set_certificate_provider(
        std::make_shared<tls::StaticDataCertificateProvider>(ssl.pem_root_certs, identity));
    if (!ssl.pem_root_certs.empty()) options.watch_root_certs();
    if (!identity.empty()) options.watch_identity_key_cert_pairs();
  }
  options.set_verify_server_certs(false);
  options.set_check_call_host(false);
  options.set_certificate_verifier(std::make_shared<tls::NoOpCertificateVerifier>());
  return tls::TlsCredentials(options);
}

}  // namespace

bool EtcdConnectionOptions::UseTls() const {
  return !cert_file.empty() || !key_file.empty() || !ca_file.empty() || !insecure_transport;
}

Result<EtcdClient::Cluster> EtcdClient::ConnectToCluster(const EtcdConnectionOptions& o) {
  const auto& eps = o.service_endpoints.empty() ? o.endpoints : o.service_endpoints;
  Status last = Unavailable("no etcd endpoint configured");
  for (const auto& ep : eps) {
    ETCDW_ASSIGN_OR_RETURN(auto c, Connect(o, ep));
    auto r = c->MemberList(std::chrono::milliseconds(5000));
    if (r.ok()) return Cluster{std::move(c), std::move(r).value()};
    last = r.status().WithContext(ep);
  }
  return last;
}

Result<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const EtcdConnectionOptions& o,
                                                        const std::string& endpoint) {
  std::string target = endpoint;
  bool https = false;
  if (target.rfind("https://", 0) == 0) {
    https = true;
    target = target.substr(8);
  } else if (target.rfind("http://", 0) == 0) {
    target = target.substr(7);
  }
  while (!target.empty() && target.back() == '/') target.pop_back();
  if (target.empty()) return InvalidArgument("etcd endpoint \"" + endpoint + "\" has no host");

  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetMaxReceiveMessageSize(-1);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (https || o.UseTls()) {
    grpc::SslCredentialsOptions ssl;
    if (!o.ca_file.empty()) {
      ETCDW_ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadFile("--cacert", o.ca_file));
    }
    if (!o.cert_file.empty() || !o.key_file.empty()) {
      ETCDW_ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadFile("--cert", o.cert_file));
      ETCDW_ASSIGN_OR_RETURN(ssl.pem_private_key, ReadFile("--key", o.key_file));
    }
    creds = o.insecure_skip_verify ? UnverifiedTlsCredentials(ssl) : grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  std::unique_ptr<EtcdClient> c(new EtcdClient());
  c->endpoint_ = endpoint;
  c->channel_ = grpc::CreateCustomChannel(target, creds, args);
  c->kv_ = etcdserverpb::KV::NewStub(c->channel_);
  c->cluster_ = etcdserverpb::Cluster::NewStub(c->channel_);
  c->maintenance_ = etcdserverpb::Maintenance::NewStub(c->channel_);
  c->watch_ = etcdserverpb::Watch::NewStub(c->channel_);
  return c;
}

EtcdClient::~EtcdClient() = default;

Result<etcdserverpb::StatusResponse> EtcdClient::EndpointStatus(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::StatusResponse resp;
  ETCDW_RETURN_IF_ERROR(FromGrpc(maintenance_->Status(&ctx, etcdserverpb::StatusRequest(), &resp)));
  return resp;
}

Result<etcdserverpb::RangeResponse> EtcdClient::Get(const std::string& key,
                                                    std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  etcdserverpb::RangeResponse resp;
  ETCDW_RETURN_IF_ERROR(FromGrpc(kv_->Range(&ctx, req, &resp)));
  return resp;
}

Result<etcdserverpb::MemberListResponse> EtcdClient::MemberList(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::MemberListResponse resp;
  ETCDW_RETURN_IF_ERROR(
      FromGrpc(cluster_->MemberList(&ctx, etcdserverpb::MemberListRequest(), &resp)));
  return resp;
}

Result<etcdserverpb::MemberAddResponse> EtcdClient::MemberAdd(
    const std::vector<std::string>& peer_urls, bool learner, std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::MemberAddRequest req;
  for (const auto& u : peer_urls) req.add_peerurls(u);
  req.set_islearner(learner);
  etcdserverpb::MemberAddResponse resp;
  ETCDW_RETURN_IF_ERROR(FromGrpc(cluster_->MemberAdd(&ctx, req, &resp)));
  return resp;
}

Status EtcdClient::MemberRemove(uint64_t id, std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::MemberRemoveRequest req;
  req.set_id(id);
  etcdserverpb::MemberRemoveResponse resp;
  return FromGrpc(cluster_->MemberRemove(&ctx, req, &resp));
}

Status EtcdClient::MemberPromote(uint64_t id, std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::MemberPromoteRequest req;
  req.set_id(id);
  etcdserverpb::MemberPromoteResponse resp;
  return FromGrpc(cluster_->MemberPromote(&ctx, req, &resp));
}

Status EtcdClient::MemberUpdate(uint64_t id, const std::vector<std::string>& peer_urls,
                                std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::MemberUpdateRequest req;
  req.set_id(id);
  for (const auto& u : peer_urls) req.add_peerurls(u);
  etcdserverpb::MemberUpdateResponse resp;
  return FromGrpc(cluster_->MemberUpdate(&ctx, req, &resp));
}

Status EtcdClient::Defragment(std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::DefragmentResponse resp;
  return FromGrpc(maintenance_->Defragment(&ctx, etcdserverpb::DefragmentRequest(), &resp));
}

Result<uint64_t> EtcdClient::SnapshotToFile(const std::string& path,
                                            std::chrono::milliseconds timeout) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Internal("cannot create \"" + path + "\": " + std::strerror(errno));
  }
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  auto reader = maintenance_->Snapshot(&ctx, etcdserverpb::SnapshotRequest());
  etcdserverpb::SnapshotResponse resp;
  uint64_t total = 0;
  etcdw::Status failed;
  while (reader->Read(&resp)) {
    const std::string& blob = resp.blob();
    size_t off = 0;
    while (off < blob.size()) {
      ssize_t n = write(fd, blob.data() + off, blob.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        failed = Internal("writing \"" + path + "\": " + std::strerror(errno));
        break;
      }
      off += static_cast<size_t>(n);
    }
    if (!failed.ok()) {
      ctx.TryCancel();
      break;
    }
    total += blob.size();
  }
  grpc::Status st = reader->Finish();
  if (failed.ok()) failed = FromGrpc(st);
  if (failed.ok() && fsync(fd) != 0) {
    failed = Internal("fsync \"" + path + "\": " + std::strerror(errno));
  }
  close(fd);
  if (!failed.ok()) return failed.WithContext("snapshot from " + endpoint_);
  return total;
}

// The stream is read by a thread of its own (`reader`) so that Next can wait with a timeout.
class EtcdClient::Watch::Impl {
 public:
  grpc::ClientContext ctx;  // thread-safe for TryCancel
  // Set before the reader starts; then the reader's alone (Read, Finish).
  std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>>
      stream;
  std::thread reader;  // started by WatchAll, joined by ~Watch
  std::mutex mu;
  std::condition_variable cv;  // with mu: queue, ended, canceled
  std::deque<etcdserverpb::WatchResponse> queue ABSL_GUARDED_BY(mu);
  bool ended ABSL_GUARDED_BY(mu) = false;
  bool canceled ABSL_GUARDED_BY(mu) = false;
  etcdw::Status end_status ABSL_GUARDED_BY(mu);

  void Read() {
    etcdserverpb::WatchResponse resp;
    while (stream->Read(&resp)) {
      std::lock_guard<std::mutex> l(mu);
      queue.push_back(resp);
      cv.notify_all();
    }
    grpc::Status st = stream->Finish();
    std::lock_guard<std::mutex> l(mu);
    ended = true;
    end_status = st.ok() ? etcdw::Status(Code::kUnavailable, "watch stream closed by the server")
                         : FromGrpc(st);
    cv.notify_all();
  }
};

EtcdClient::Watch::Watch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EtcdClient::Watch::~Watch() {
  Cancel();
  if (impl_->reader.joinable()) impl_->reader.join();
}

void EtcdClient::Watch::Cancel() {
  {
    std::lock_guard<std::mutex> l(impl_->mu);
    impl_->canceled = true;
    impl_->cv.notify_all();
  }
  impl_->ctx.TryCancel();
}

Result<etcdserverpb::WatchResponse> EtcdClient::Watch::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(impl_->mu);
  bool got = impl_->cv.wait_for(
      l, timeout, [&] { return impl_->canceled || !impl_->queue.empty() || impl_->ended; });
  if (impl_->canceled) return etcdw::Status(Code::kCanceled, "watch canceled");
  if (!impl_->queue.empty()) {
    etcdserverpb::WatchResponse r = std::move(impl_->queue.front());
    impl_->queue.pop_front();
    if (r.compact_revision() > 0) {
      return etcdw::Status(Code::kOutOfRange,
                           "watch: required revision has been compacted (compact revision " +
                               std::to_string(r.compact_revision()) + ")");
    }
    if (r.canceled()) {
      return etcdw::Status(Code::kAborted, "watch canceled by the server: " + r.cancel_reason());
    }
    return r;
  }
  if (impl_->ended) return impl_->end_status;
  (void)got;
  return etcdw::Status(Code::kDeadlineExceeded, "no watch events");
}

Result<std::unique_ptr<EtcdClient::Watch>> EtcdClient::WatchAll(int64_t start_revision) {
  auto impl = std::make_unique<Watch::Impl>();
  impl->stream = watch_->Watch(&impl->ctx);
  etcdserverpb::WatchRequest req;
  auto* create = req.mutable_create_request();
  create->set_key(std::string(1, '\0'));
  create->set_range_end(std::string(1, '\0'));
  create->set_start_revision(start_revision);
  create->set_prev_kv(true);
  if (!impl->stream->Write(req)) {
    grpc::Status st = impl->stream->Finish();
    return FromGrpc(st.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE, "watch stream closed")
                            : st)
        .WithContext("watch on " + endpoint_);
  }
  Watch::Impl* raw = impl.get();
  impl->reader = std::thread([raw] { raw->Read(); });
  return std::unique_ptr<Watch>(new Watch(std::move(impl)));
}

}  // namespace etcdw::sidecar

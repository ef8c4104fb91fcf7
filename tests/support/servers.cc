#include "servers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace etcdw::testing {

bool PortOpen(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string EtcdWrapperBinary() {
  const char* env = std::getenv("ETCDW_BINARY");
  return env ? env : ETCDW_BINARY;
}

std::string EtcdbrctlBinary() {
  const char* env = std::getenv("ETCDW_BRCTL_BINARY");
  return env ? env : ETCDW_BRCTL_BINARY;
}

std::unique_ptr<grpc::ClientContext> Ctx(std::chrono::milliseconds timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + timeout);
  return ctx;
}

Client::Client(std::shared_ptr<grpc::Channel> ch)
    : channel(ch),
      kv(etcdserverpb::KV::NewStub(ch)),
      watch(etcdserverpb::Watch::NewStub(ch)),
      lease(etcdserverpb::Lease::NewStub(ch)),
      maintenance(etcdserverpb::Maintenance::NewStub(ch)),
      cluster(etcdserverpb::Cluster::NewStub(ch)),
      auth(etcdserverpb::Auth::NewStub(ch)) {}

grpc::Status Client::Put(const std::string& key, const std::string& value, int64_t lease,
                         etcdserverpb::PutResponse* out) {
  etcdserverpb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  etcdserverpb::PutResponse resp;
  auto st = kv->Put(Ctx().get(), req, out ? out : &resp);
  return st;
}

grpc::Status Client::Get(const std::string& key, etcdserverpb::RangeResponse* out,
                         const std::string& range_end, int64_t rev) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  req.set_range_end(range_end);
  req.set_revision(rev);
  return kv->Range(Ctx().get(), req, out);
}

Member::Member(Kind kind, std::string name)
    : kind_(kind), name_(std::move(name)), client_port_(FreePort()), peer_port_(FreePort()) {
  data_dir_ = dir_.File("data");
}

Member::~Member() { proc_.Kill(); }

std::string Member::log() const { return ReadFile(dir_.File("member.log")); }

std::shared_ptr<grpc::Channel> Member::NewChannel() const {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(endpoint(), grpc::InsecureChannelCredentials(), args);
}

Client& Member::client() {
  if (!client_) client_ = std::make_unique<Client>(NewChannel());
  return *client_;
}

bool Member::Start(const Settings& extra, std::chrono::milliseconds timeout) {
  return Launch(extra) && WaitReady(timeout);
}

bool Member::Launch(const Settings& extra) {
  Settings s = {
      {"name", name_},
      {"data-dir", data_dir_},
      {"listen-client-urls", url()},
      {"advertise-client-urls", url()},
      {"listen-peer-urls", peer_url()},
      {"initial-advertise-peer-urls", advertised_peer_url()},
      {"initial-cluster", name_ + "=" + advertised_peer_url()},
  };
  for (const auto& [k, v] : extra) s[k] = v;
  std::vector<std::string> argv;
  if (kind_ == Kind::kEtcd) {
    argv.push_back("etcd");
    for (const auto& [k, v] : s) argv.push_back("--" + k + "=" + v);
  } else {
    std::string yaml;
    for (const auto& [k, v] : s) yaml += k + ": " + v + "\n";
    std::string path = dir_.File("config-" + std::to_string(++starts_) + ".yaml");
    WriteFile(path, yaml);
    argv = {EtcdWrapperBinary(), "--config", path};
    argv.insert(argv.end(), extra_args_.begin(), extra_args_.end());
  }
  std::vector<std::string> env = {"ETCD_UNSUPPORTED_ARCH=", "ETCDCTL_API=3"};
  env.insert(env.end(), extra_env_.begin(), extra_env_.end());
  if (!proc_.Start(argv, dir_.File("member.log"), env)) {
    return false;
  }
  client_.reset();
  return true;
}

bool Member::WaitReady(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!PortOpen(client_port_)) {
    if (!proc_.Running() || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  while (std::chrono::steady_clock::now() < deadline) {
    if (!proc_.Running()) return false;
    etcdserverpb::StatusRequest req;
    etcdserverpb::StatusResponse resp;
    auto st = client().maintenance->Status(Ctx(std::chrono::milliseconds(500)).get(), req, &resp);
    if (st.ok() && resp.leader() != 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::optional<int> Member::Stop(std::chrono::milliseconds timeout) {
  client_.reset();
  proc_.Signal(SIGTERM);
  auto r = proc_.Wait(timeout);
  if (!r) proc_.Kill();
  return r;
}

void Member::Kill() {
  client_.reset();
  proc_.Kill();
}

}  // namespace etcdw::testing

namespace etcdw::testing {

TestCluster::TestCluster(int n, Member::Kind kind) {
  for (int i = 0; i < n; ++i) {
    members_.push_back(std::make_unique<Member>(kind, "m" + std::to_string(i)));
  }
}

std::string TestCluster::InitialCluster() const {
  std::string ic;
  for (const auto& m : members_) {
    if (!ic.empty()) ic += ",";
    ic += m->name() + "=" + m->advertised_peer_url();
  }
  return ic;
}

Settings TestCluster::SettingsFor(const Settings& extra) const {
  Settings s = {{"initial-cluster", InitialCluster()}, {"initial-cluster-token", "test-cluster"}};
  for (const auto& [k, v] : extra) s[k] = v;
  return s;
}

Member& TestCluster::Add() {
  members_.push_back(
      std::make_unique<Member>(members_.front()->kind(), "m" + std::to_string(members_.size())));
  return *members_.back();
}

bool TestCluster::StartAll(const Settings& extra, std::chrono::milliseconds timeout) {
  for (auto& m : members_) {
    if (!m->Launch(SettingsFor(extra))) return false;
  }
  for (auto& m : members_) {
    if (!m->WaitReady(timeout)) return false;
  }
  return true;
}

int TestCluster::Leader() {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!members_[i]->Running()) continue;
    etcdserverpb::StatusRequest req;
    etcdserverpb::StatusResponse resp;
    auto st = members_[i]->client().maintenance->Status(Ctx(std::chrono::milliseconds(500)).get(),
                                                        req, &resp);
    if (st.ok() && resp.leader() != 0 && resp.leader() == resp.header().member_id()) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int TestCluster::WaitForLeader(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int l = Leader();
    if (l >= 0) return l;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::string TestCluster::LogTails(size_t max_bytes) const {
  std::string out;
  for (const auto& m : members_) {
    std::string log = m->log();
    if (log.size() > max_bytes) log = log.substr(log.size() - max_bytes);
    out += "---- " + m->name() + " log (tail) ----\n" + log + "\n";
  }
  return out;
}

std::string TestCluster::Endpoints() const {
  std::string e;
  for (const auto& m : members_) {
    if (!e.empty()) e += ",";
    e += m->endpoint();
  }
  return e;
}

}  // namespace etcdw::testing

#include "target.h"

namespace etcdw::bench {

testing::Settings BenchSettings() { return {{"quota-backend-bytes", std::to_string(8LL << 30)}}; }

Target::Target(Member::Kind kind, int members) : kind_(kind), cluster_(members, kind) {}

const char* Target::label() const { return kind_ == Member::Kind::kEtcd ? "etcd" : "ours"; }

bool Target::Start(std::string* error) {
  if (cluster_.StartAll(BenchSettings(), std::chrono::seconds(60)) &&
      cluster_.WaitForLeader(std::chrono::seconds(30)) >= 0) {
    return true;
  }
  *error = std::string(label()) + " did not start:\n" + cluster_.LogTails();
  return false;
}

std::vector<pid_t> Target::pids() {
  std::vector<pid_t> out;
  for (int i = 0; i < size(); ++i) out.push_back(member(i).process().pid());
  return out;
}

std::shared_ptr<grpc::Channel> Target::NewChannel(int i) { return member(i % size()).NewChannel(); }

std::vector<std::shared_ptr<grpc::Channel>> Target::Channels(int count) {
  std::vector<std::shared_ptr<grpc::Channel>> out;
  for (int i = 0; i < count; ++i) out.push_back(NewChannel(i));
  return out;
}

std::shared_ptr<GrpcUnaryClient> Target::UnaryClient(int count, std::string* error) {
  std::vector<std::string> endpoints;
  for (int i = 0; i < count; ++i) endpoints.push_back(member(i % size()).endpoint());
  return GrpcUnaryClient::Connect(endpoints, error);
}

}  // namespace etcdw::bench

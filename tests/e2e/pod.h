// The etcd pod for end-to-end tests: the real `etcdbrctl server` and the real
// `etcd-wrapper start-etcd` bootstrapped by it, with the etcd config template written as
// etcd-druid writes it (URL keys as maps from member name to URLs). A pod may run its wrapper
// under a supervisor that restarts it whenever it exits, as the kubelet restarts a container
// (the wrapper's /stop ends it with exit 0).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"
#include "etcdw/common/http.h"
#include "s3rver.h"

namespace etcdw::testing {

// The ports of one pod: its sidecar's API, the wrapper's /readyz, etcd's client and peer ports.
struct PodPorts {
  int sidecar = FreePort(), wrapper = FreePort(), client = FreePort(), peer = FreePort();
  std::string ClientUrl() const { return "http://127.0.0.1:" + std::to_string(client); }
  std::string PeerUrl(bool https = false) const {
    return std::string(https ? "https" : "http") + "://127.0.0.1:" + std::to_string(peer);
  }
};

// Peer TLS material for the config template's peer-transport-security block.
struct PeerTlsFiles {
  std::string cert, key, ca;
};

class Pod {
 public:
  // A one-member cluster. Backups go to a Local store under $HOME, or to the bucket
  // "etcd-backups" of `s3`.
  explicit Pod(const S3rver* s3 = nullptr) : Pod(0, {PodPorts()}, s3) {}
  // Member `index` (etcd-main-<index>) of the cluster whose pods have `cluster`'s ports.
  Pod(size_t index, const std::vector<PodPorts>& cluster, const S3rver* s3 = nullptr);
  ~Pod();

  // (Re)writes the config template for `cluster_size` members (the first ones of the ports
  // given at construction), with https peer URLs and a peer-transport-security block when
  // `tls` is given.
  void WriteConfig(size_t cluster_size, const PeerTlsFiles* tls = nullptr);

  const std::string& name() const { return name_; }
  std::string DataDir() const { return dir_.File("data/new.etcd"); }
  std::string Endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  std::string Backups() const { return dir_.File("home/backups/etcd-main/v2"); }
  std::string File(const std::string& name) const { return dir_.File(name); }

  // The environment of both containers; `extra` entries are added ("NAME=value").
  std::vector<std::string> Env() const;
  void AddEnv(const std::string& entry) { extra_env_.push_back(entry); }

  // The sidecar with the arguments the other pod tests use.
  bool StartSidecar();
  // The sidecar with etcd-druid's argument list (its statefulset builder), Local store.
  bool StartSidecarAsDruidDoes();
  bool StartSidecarWith(const std::vector<std::string>& args);  // args after "server"
  bool StartWrapper();
  // Runs the wrapper and restarts it whenever it exits, until StopSupervising().
  void SuperviseWrapper();
  void StopSupervising();
  // Restarts the wrapper has had under supervision.
  int wrapper_restarts() const { return restarts_.load(); }

  Process& wrapper() { return wrapper_; }
  Process& sidecar() { return sidecar_; }

  Result<common::HttpResponse> Get(int port, const std::string& target);
  Result<common::HttpResponse> Sidecar(const std::string& target) {
    return Get(sidecar_port_, target);
  }
  bool WaitReady(std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // Until this sidecar leads the backups and its start-up full snapshot is in the store.
  bool WaitBackupLeader(std::chrono::milliseconds timeout = std::chrono::seconds(40));

  std::string SidecarLog() const { return ReadFile(dir_.File("sidecar.log")); }
  std::string Logs() const;

 private:
  const S3rver* s3_;
  std::vector<PodPorts> cluster_;
  size_t index_;
  std::string name_;
  TempDir dir_;
  int sidecar_port_, wrapper_port_, client_port_, peer_port_;
  std::vector<std::string> extra_env_;
  Process sidecar_;
  std::mutex wrapper_mu_;  // the supervisor and the test start and kill the wrapper
  Process wrapper_;
  std::atomic<bool> supervising_{false};
  std::atomic<int> restarts_{0};
  std::thread supervisor_;
};

// Every key with its revisions, and the store's revision, as etcdctl reports them.
struct Dump {
  int64_t revision = 0;
  std::vector<std::string> kvs;  // "key=value@create/mod/version"
  bool operator==(const Dump&) const = default;
};
Dump DumpAll(const std::string& endpoint);

// Starts the pod's sidecar and wrapper, writes keys, takes a full snapshot, changes keys
// (overwrites, deletes, new ones), takes a delta snapshot; returns the state backed up. Checks
// each step with gtest assertions.
Dump WriteAndBackUp(Pod& pod);

// The member list as sorted "name:learner" / "name:voter" entries, through `endpoint`.
std::vector<std::string> MemberNames(const std::string& endpoint);

}  // namespace etcdw::testing

// `etcd-wrapper start-etcd` end to end: the real binary against an in-process fake sidecar
// (HTTP and HTTPS), checking the calls it makes, the validation mode it asks for after each
// kind of stop, the exit-code file, /readyz and /stop, and its errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster_util.h"
#include "e2e_util.h"
#include "etcdw/common/http.h"
#include "fake_sidecar.h"
#include "test_certs.h"

namespace etcdw::testing {
namespace {

using namespace std::chrono_literals;

// One etcd pod: the wrapper process, its fake sidecar, its home and data directories.
class WrapperPod {
 public:
  WrapperPod()
      : sidecar_port_(FreePort()),
        wrapper_port_(FreePort()),
        client_port_(FreePort()),
        peer_port_(FreePort()) {}
  ~WrapperPod() { proc_.Kill(); }

  FakeSidecar& sidecar() { return sidecar_; }
  int sidecar_port() const { return sidecar_port_; }
  int wrapper_port() const { return wrapper_port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(client_port_); }
  std::string home() const { return dir_.path(); }
  std::string exit_code_file() const { return dir_.File("exit_code"); }
  Process& process() { return proc_; }

  // The etcd config the sidecar serves: a single member on this pod's ports.
  std::string Config(const std::string& client_scheme = "http", const std::string& extra = "") {
    std::string client = client_scheme + "://127.0.0.1:" + std::to_string(client_port_);
    std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    return "name: pod-0\ndata-dir: " + dir_.File("data/new.etcd") +
           "\nlisten-client-urls: " + client + "\nadvertise-client-urls: " + client +
           "\nlisten-peer-urls: " + peer + "\ninitial-advertise-peer-urls: " + peer +
           "\ninitial-cluster: pod-0=" + peer + "\ninitial-cluster-state: new\n" + extra;
  }

  std::vector<std::string> Args(const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> a = {
        EtcdWrapperBinary(),
        "start-etcd",
        "--backup-restore-host-port=127.0.0.1:" + std::to_string(sidecar_port_),
        "--etcd-wrapper-port",
        std::to_string(wrapper_port_),
        "--etcd-client-port=" + std::to_string(client_port_),
        "--etcd-server-name=127.0.0.1",
        "--exit-code-file=" + exit_code_file()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  bool Launch(const std::vector<std::string>& extra = {}) {
    return proc_.Start(Args(extra), dir_.File("wrapper-" + std::to_string(++starts_) + ".log"),
                       {"HOME=" + home()});
  }
  std::string log() const {
    return ReadFile(dir_.File("wrapper-" + std::to_string(starts_) + ".log"));
  }

  // GET /readyz: the HTTP status, or -1 when the request failed.
  int Readyz(const common::HttpClientOptions& tls = {}) {
    common::HttpClientOptions o = tls;
    o.timeout = 2s;
    auto c = common::HttpClient::Create(o);
    if (!c.ok()) return -1;
    auto r = (*c)->Get("127.0.0.1:" + std::to_string(wrapper_port_), "/readyz");
    return r.ok() ? r->status : -1;
  }
  bool WaitReadyz(int want, std::chrono::milliseconds timeout = 30s,
                  const common::HttpClientOptions& tls = {}) {
    return WaitUntil([&] { return Readyz(tls) == want; }, timeout);
  }

 private:
  TempDir dir_;
  int sidecar_port_, wrapper_port_, client_port_, peer_port_;
  FakeSidecar sidecar_;
  Process proc_;
  int starts_ = 0;
};

bool FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

TEST(WrapperTest, BootstrapsThroughTheSidecarAndPicksTheValidationModeFromHowItStopped) {
  WrapperPod pod;
  // First start: the sidecar's first initialisation fails, the second succeeds.
  pod.sidecar().AddOutcome({1, "Failed"});
  pod.sidecar().AddOutcome({1, "Successful"});
  pod.sidecar().SetConfig(200, pod.Config());
  ASSERT_TRUE(pod.sidecar().Start(pod.sidecar_port()));
  ASSERT_TRUE(pod.Launch());
  ASSERT_TRUE(pod.WaitReadyz(200)) << pod.log();
  EXPECT_EQ(pod.sidecar().CollapsedCalls(),
            (std::vector<std::string>{"status:New", "start:full", "status:Progress",
                                      "status:Failed", "status:New", "start:full",
                                      "status:Progress", "status:Successful", "config"}))
      << pod.log();
  // The config is kept where gardener's wrapper keeps it, readable by the owner only.
  struct stat st {};
  ASSERT_EQ(::stat((pod.home() + "/etcd.conf.yaml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(ReadFile(pod.home() + "/etcd.conf.yaml"), pod.Config());
  // It is the store: etcdctl writes and reads.
  ASSERT_EQ(Etcdctl(pod.endpoint(), {"put", "k", "v1"}).rc, 0);

  // SIGTERM: the signal is recorded, the stop is graceful.
  pod.process().Signal(SIGTERM);
  ASSERT_EQ(pod.process().Wait(20s), 0) << pod.log();
  EXPECT_EQ(ReadFile(pod.exit_code_file()), "terminated");
  // A legacy marker beside it is removed at the next start.
  WriteFile(pod.home() + "/validation_marker", "x");

  // Restart: sanity validation, and the exit-code file is gone once the store runs.
  ASSERT_TRUE(pod.Launch());
  ASSERT_TRUE(pod.WaitReadyz(200)) << pod.log();
  EXPECT_EQ(pod.sidecar().StartModes(), (std::vector<std::string>{"full", "full", "sanity"}));
  EXPECT_FALSE(FileExists(pod.exit_code_file()));
  EXPECT_FALSE(FileExists(pod.home() + "/validation_marker"));
  CmdResult get = Etcdctl(pod.endpoint(), {"get", "k", "--print-value-only"});
  EXPECT_EQ(get.out, "v1\n") << get.Describe();

  // kill -9: nothing recorded, so the next start asks for full validation.
  pod.process().Kill();
  ASSERT_TRUE(pod.Launch());
  ASSERT_TRUE(pod.WaitReadyz(200)) << pod.log();
  EXPECT_EQ(pod.sidecar().StartModes().back(), "full");
  get = Etcdctl(pod.endpoint(), {"get", "k", "--print-value-only"});
  EXPECT_EQ(get.out, "v1\n") << get.Describe();

  // SIGINT is recorded as "interrupt" and also leads to sanity.
  pod.process().Signal(SIGINT);
  ASSERT_EQ(pod.process().Wait(20s), 0) << pod.log();
  EXPECT_EQ(ReadFile(pod.exit_code_file()), "interrupt");
  ASSERT_TRUE(pod.Launch());
  ASSERT_TRUE(pod.WaitReadyz(200)) << pod.log();
  EXPECT_EQ(pod.sidecar().StartModes().back(), "sanity");
}

TEST(WrapperTest, StopEndpointExitsWithoutRecordingASignal) {
  WrapperPod pod;
  pod.sidecar().SetConfig(200, pod.Config());
  ASSERT_TRUE(pod.sidecar().Start(pod.sidecar_port()));
  ASSERT_TRUE(pod.Launch());
  ASSERT_TRUE(pod.WaitReadyz(200)) << pod.log();
  std::string url = "http://127.0.0.1:" + std::to_string(pod.wrapper_port());
  // Only POST acts; unknown paths are 404.
  std::string out;
  EXPECT_EQ(
      RunCommand({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url + "/stop"}, &out), 0);
  EXPECT_EQ(out, "405");
  out.clear();
  RunCommand({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url + "/nope"}, &out);
  EXPECT_EQ(out, "404");
  out.clear();
  RunCommand({"curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", url + "/readyz"}, &out);
  EXPECT_EQ(out, "200");
  out.clear();
  RunCommand({"curl", "-s", "-X", "POST", "-o", "/dev/null", "-w", "%{http_code}", url + "/stop"},
             &out);
  EXPECT_EQ(out, "200");
  ASSERT_EQ(pod.process().Wait(20s), 0) << pod.log();
  EXPECT_FALSE(FileExists(pod.exit_code_file()));
  // So the next start validates fully.
  ASSERT_TRUE(pod.Launch());
  ASSERT_TRUE(pod.WaitReadyz(200)) << pod.log();
  EXPECT_EQ(pod.sidecar().StartModes(), (std::vector<std::string>{"full", "full"}));
}

TEST(WrapperTest, WaitsForASidecarThatIsNotUpYet) {
  WrapperPod pod;
  pod.sidecar().SetConfig(200, pod.Config());
  ASSERT_TRUE(pod.Launch());
  // It keeps trying, each failure logged with the wait before the next attempt, which grows
  // (BootstrapTest drives the whole schedule on a manual clock).
  auto failures = [&] {
    return LogsWithMsg(pod.log(), "error while fetching initialization status");
  };
  ASSERT_TRUE(WaitUntil([&] { return failures().size() >= 2; }, 30s)) << pod.log();
  EXPECT_TRUE(pod.process().Running()) << pod.log();
  EXPECT_EQ(pod.Readyz(), -1) << "the /readyz server starts with the store";
  const auto logged = failures();
  EXPECT_EQ(logged.at(0).value("retry-in", ""), "1s") << pod.log();
  EXPECT_EQ(logged.at(1).value("retry-in", ""), "2s") << pod.log();
  ASSERT_TRUE(pod.sidecar().Start(pod.sidecar_port()));
  ASSERT_TRUE(pod.WaitReadyz(200, 30s)) << pod.log();
}

TEST(WrapperTest, SignalsDuringBootstrapAndASecondSignal) {
  WrapperPod pod;
  // Never up: a SIGTERM while waiting is recorded and ends the process with 0.
  ASSERT_TRUE(pod.Launch());
  ASSERT_TRUE(WaitUntil([&] {
    return !LogsWithMsg(pod.log(), "error while fetching initialization status").empty();
  })) << pod.log();  // it is waiting for the sidecar (and blocks the stop signals by then)
  pod.process().Signal(SIGTERM);
  ASSERT_EQ(pod.process().Wait(10s), 0) << pod.log();
  EXPECT_EQ(ReadFile(pod.exit_code_file()), "terminated");

  // A second signal while the graceful stop is under way exits at once with 1. Both are
  // delivered while the process is stopped (SIGSTOP), so the second is certain to arrive
  // before the graceful stop could finish (two different signals, so they do not merge).
  pod.sidecar().SetConfig(200, pod.Config());
  ASSERT_TRUE(pod.sidecar().Start(pod.sidecar_port()));
  ASSERT_TRUE(pod.Launch());
  ASSERT_TRUE(pod.WaitReadyz(200)) << pod.log();
  pod.process().Signal(SIGSTOP);
  pod.process().Signal(SIGINT);
  pod.process().Signal(SIGTERM);
  pod.process().Signal(SIGCONT);
  EXPECT_EQ(pod.process().Wait(10s), 1) << pod.log();
  EXPECT_EQ(LogsWithMsg(pod.log(), "second stop signal, exiting immediately").size(), 1u)
      << pod.log();
}

TEST(WrapperTest, HttpsSidecarAndTlsClientPort) {
  TestCerts certs;
  ASSERT_TRUE(certs.AddCa("ca") && certs.Issue("server", "ca", {"etcd-main-local"}) &&
              certs.Issue("client", "ca"))
      << certs.log();
  WrapperPod pod;
  std::string tls = "client-transport-security:\n  cert-file: " + certs.Crt("server") +
                    "\n  key-file: " + certs.Key("server") +
                    "\n  trusted-ca-file: " + certs.Crt("ca") + "\n  client-cert-auth: true\n";
  pod.sidecar().SetConfig(200, pod.Config("https", tls));
  ASSERT_TRUE(pod.sidecar().Start(pod.sidecar_port(), certs.Crt("server"), certs.Key("server")));
  // The sidecar's name comes from the host part of the host-port ("localhost" here).
  ASSERT_TRUE(
      pod.Launch({"--backup-restore-tls-enabled=true",
                  "--backup-restore-host-port=localhost:" + std::to_string(pod.sidecar_port()),
                  "--backup-restore-ca-cert-bundle-path=" + certs.Crt("ca"),
                  "--etcd-server-name=localhost", "--etcd-client-cert-path=" + certs.Crt("client"),
                  "--etcd-client-key-path", certs.Key("client")}));
  common::HttpClientOptions https;
  https.tls = true;
  https.ca_file = certs.Crt("ca");
  // Ready within seconds of serving: gRPC's client noticed a reconnect only every 5 s in a
  // process without a gRPC server, and took 20 s here (cmd::PollClientConnectionsPromptly).
  ASSERT_TRUE(pod.WaitReadyz(200, 12s, https)) << pod.log();
  EXPECT_EQ(pod.Readyz(), -1) << "/readyz is served over HTTPS only";
  std::string out;
  std::string url = "https://127.0.0.1:" + std::to_string(pod.wrapper_port());
  RunCommand({"curl", "-s", "--cacert", certs.Crt("ca"), "-o", "/dev/null", "-w", "%{http_code}",
              url + "/readyz"},
             &out);
  EXPECT_EQ(out, "200");
  out.clear();
  RunCommand({"curl", "-s", "-X", "POST", "--cacert", certs.Crt("ca"), "-o", "/dev/null", "-w",
              "%{http_code}", url + "/stop"},
             &out);
  EXPECT_EQ(out, "200");
  ASSERT_EQ(pod.process().Wait(20s), 0) << pod.log();
}

TEST(WrapperTest, BadFlagsAndCombinationsAreRejected) {
  CmdResult r = RunWrapper({"start-etcd", "--no-such-flag"});
  EXPECT_EQ(r.rc, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "flag provided but not defined: -no-such-flag")) << r.err;
  EXPECT_TRUE(Contains(r.err, "Usage of etcd-wrapper start-etcd")) << r.err;
  r = RunWrapper({"start-etcd", "--etcd-client-port=abc"});
  EXPECT_EQ(r.rc, 2) << r.Describe();
  r = RunWrapper({"start-etcd", "--etcd-ready-timeout=5"});
  EXPECT_EQ(r.rc, 2) << r.Describe();
  r = RunWrapper({"start-etcd", "--backup-restore-tls-enabled=maybe"});
  EXPECT_EQ(r.rc, 2) << r.Describe();
  r = RunWrapper({"start-etcd", "-h"});
  EXPECT_EQ(r.rc, 0) << r.Describe();
  EXPECT_TRUE(Contains(r.out, "-backup-restore-host-port")) << r.out;

  r = RunWrapper({"start-etcd", "--backup-restore-host-port=http://localhost:8080"});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "must not contain a scheme")) << r.err;
  r = RunWrapper({"start-etcd", "--backup-restore-host-port", "localhost"});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "missing port")) << r.err;
  r = RunWrapper({"start-etcd", "--backup-restore-tls-enabled"});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "--backup-restore-ca-cert-bundle-path is required")) << r.err;

  TempDir dir;
  WriteFile(dir.File("bad-ca.pem"), "not a certificate\n");
  r = RunWrapper({"start-etcd", "--backup-restore-tls-enabled=true",
                  "--backup-restore-ca-cert-bundle-path=" + dir.File("bad-ca.pem"),
                  "--exit-code-file=" + dir.File("exit_code")});
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "bad-ca.pem")) << r.err;
  EXPECT_TRUE(Contains(r.err, "no PEM certificate")) << r.err;
}

TEST(WrapperTest, UnreachableSidecarAndBadConfigsGiveClearErrors) {
  WrapperPod pod;
  // Nobody listens: the optional overall timeout ends the wait.
  CmdResult r;
  std::vector<std::string> args = pod.Args({"--bootstrap-timeout=2s"});
  args.erase(args.begin());
  r = RunWrapper(args, 20s);
  EXPECT_EQ(r.rc, 1) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "did not report a successful initialisation within 2s")) << r.err;
  EXPECT_TRUE(Contains(r.err, "connect")) << r.err;

  // A config the store cannot use: the error names the key.
  ASSERT_TRUE(pod.sidecar().Start(pod.sidecar_port()));
  pod.sidecar().SetConfig(200, pod.Config() + "listen-client-urls: ftp://127.0.0.1:1\n");
  ASSERT_TRUE(pod.Launch());
  ASSERT_EQ(pod.process().Wait(20s), 1) << pod.log();
  auto invalid = LogsWithMsg(pod.log(), "invalid etcd configuration");
  ASSERT_EQ(invalid.size(), 1u) << pod.log();
  EXPECT_TRUE(Contains(invalid[0].value("error", ""), "listen-client-urls")) << invalid[0].dump();

  // /config keeps failing: five attempts, then a clear error.
  pod.sidecar().SetConfig(500, "boom");
  ASSERT_TRUE(pod.Launch());
  ASSERT_EQ(pod.process().Wait(30s), 1) << pod.log();
  auto failed = LogsWithMsg(pod.log(), "cannot fetch the etcd configuration");
  ASSERT_EQ(failed.size(), 1u) << pod.log();
  EXPECT_TRUE(Contains(failed[0].value("error", ""), "after 5 attempts")) << failed[0].dump();
  EXPECT_TRUE(Contains(failed[0].value("error", ""), "HTTP status 500: boom")) << failed[0].dump();
  int config_calls = 0;
  for (auto& c : pod.sidecar().calls()) config_calls += c == "config";
  EXPECT_EQ(config_calls, 5 + 1);  // five now, one for the bad config above

  // Without HOME there is nowhere to put the config.
  Process p;
  ASSERT_TRUE(p.Start(pod.Args(), pod.home() + "/nohome.log", {"HOME"}));
  EXPECT_EQ(p.Wait(20s), 1);
  EXPECT_TRUE(Contains(ReadFile(pod.home() + "/nohome.log"), "HOME is not set"));
}

TEST(WrapperTest, ReadyzFollowsQuorumInAThreeMemberCluster) {
  TestCluster c(3);
  std::vector<int> ports;
  for (int i = 0; i < 3; ++i) {
    ports.push_back(FreePort());
    c.member(i).set_extra_args({"--etcd-wrapper-port=" + std::to_string(ports.back())});
  }
  ASSERT_TRUE(c.StartAll()) << c.LogTails();
  auto readyz = [&](int i) {
    common::HttpClientOptions o;
    o.timeout = 2s;
    auto r =
        (*common::HttpClient::Create(o))->Get("127.0.0.1:" + std::to_string(ports[i]), "/readyz");
    return r.ok() ? r->status : -1;
  };
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(WaitUntil([&] { return readyz(i) == 200; }, 20s)) << c.LogTails();
  }
  // Two members gone: the survivor has no quorum and turns 503 promptly.
  c.member(1).Kill();
  c.member(2).Kill();
  auto lost = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitUntil([&] { return readyz(0) == 503; }, 10s)) << c.LogTails();
  EXPECT_LT(std::chrono::steady_clock::now() - lost, 5s);
  // Back: 200 again.
  ASSERT_TRUE(c.member(1).Launch(c.SettingsFor({})));
  ASSERT_TRUE(c.member(2).Launch(c.SettingsFor({})));
  EXPECT_TRUE(WaitUntil([&] { return readyz(0) == 200; }, 30s)) << c.LogTails();
}

}  // namespace
}  // namespace etcdw::testing

// End-to-end tests of the etcd-wrapper command line: flags, config file errors, logs, signals.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include "e2e_util.h"
#include "servers.h"
#include "watch_requests.h"

namespace etcdw::testing {
namespace {

using nlohmann::json;

// A config file for a member on free loopback ports in `dir`, with `overrides` applied (an
// empty value removes the key).
std::string WriteConfig(const TempDir& dir, const Settings& overrides,
                        const std::string& name = "config.yaml") {
  int client = FreePort(), peer = FreePort();
  std::string curl = "http://127.0.0.1:" + std::to_string(client);
  std::string purl = "http://127.0.0.1:" + std::to_string(peer);
  Settings s = {
      {"name", "default"},
      {"data-dir", dir.File("data")},
      {"listen-client-urls", curl},
      {"advertise-client-urls", curl},
      {"listen-peer-urls", purl},
      {"initial-advertise-peer-urls", purl},
      {"initial-cluster", "default=" + purl},
  };
  for (const auto& [k, v] : overrides) {
    if (v.empty()) {
      s.erase(k);
    } else {
      s[k] = v;
    }
  }
  std::string yaml;
  for (const auto& [k, v] : s) yaml += k + ": " + v + "\n";
  std::string path = dir.File(name);
  WriteFile(path, yaml);
  return path;
}

std::vector<std::string> NonEmptyLines(const std::string& text) {
  std::vector<std::string> out;
  for (auto& l : Lines(text)) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

// Expects `text` to be JSON log lines only, each with level, ts, caller and msg.
void ExpectJsonLogLines(const std::string& text) {
  auto lines = NonEmptyLines(text);
  EXPECT_FALSE(lines.empty());
  static const std::regex ts(R"(^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$)");
  for (const auto& line : lines) {
    auto j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "not a JSON log line: " << line;
    ASSERT_TRUE(j.is_object()) << line;
    ASSERT_TRUE(j.contains("level") && j["level"].is_string()) << line;
    EXPECT_TRUE(j["level"] == "debug" || j["level"] == "info" || j["level"] == "warn" ||
                j["level"] == "error")
        << line;
    ASSERT_TRUE(j.contains("ts") && j["ts"].is_string()) << line;
    EXPECT_TRUE(std::regex_match(j["ts"].get<std::string>(), ts)) << line;
    EXPECT_TRUE(j.contains("caller") && j["caller"].is_string()) << line;
    EXPECT_TRUE(j.contains("msg") && j["msg"].is_string()) << line;
  }
}

const std::vector<std::string> kFlags = {"--config",         "--log-level", "--etcd-wrapper-port",
                                         "--exit-code-file", "--help",      "--version"};

TEST(CliTest, Help) {
  for (const char* flag : {"--help", "-h", "-help"}) {
    CmdResult r = RunWrapper({flag});
    EXPECT_EQ(r.rc, 0) << flag << "\n" << r.Describe();
    EXPECT_EQ(r.err, "") << flag;
    EXPECT_TRUE(Contains(r.out, "Usage:")) << r.out;
    for (const auto& f : kFlags) EXPECT_TRUE(Contains(r.out, f)) << f << " missing from\n" << r.out;
  }
}

TEST(CliTest, Version) {
  CmdResult r = RunWrapper({"--version"});
  EXPECT_EQ(r.rc, 0) << r.Describe();
  EXPECT_EQ(r.err, "");
  std::regex re(
      "^etcd-wrapper Version: \\d+\\.\\d+\\.\\d+\n"
      "Git SHA: \\S+\n"
      "etcd API Version: 3\\.\\d+\n"
      "Compatible etcd Version: 3\\.\\d+\\.\\d+\n$");
  EXPECT_TRUE(std::regex_match(r.out, re)) << r.out;
  // -version works with a single dash too, and before other flags.
  CmdResult r2 = RunWrapper({"-version", "--log-level", "debug"});
  EXPECT_EQ(r2.rc, 0) << r2.Describe();
  EXPECT_EQ(r2.out, r.out);
}

TEST(CliTest, UnknownFlag) {
  CmdResult r = RunWrapper({"-x"});
  EXPECT_EQ(r.rc, 2) << r.Describe();
  EXPECT_EQ(r.out, "");
  auto lines = Lines(r.err);
  ASSERT_GE(lines.size(), 3u) << r.err;
  EXPECT_EQ(lines[0], "flag provided but not defined: -x");
  EXPECT_EQ(lines[1], "Usage of etcd-wrapper:");
  for (const char* f : {"  -config string", "  -log-level string", "  -etcd-wrapper-port int",
                        "  -exit-code-file string", "  -version"}) {
    EXPECT_TRUE(Contains(r.err, std::string(f) + "\n")) << f << " missing from\n" << r.err;
  }

  r = RunWrapper({"--config", "/nonexistent.yaml", "--no-such-flag=1"});
  EXPECT_EQ(r.rc, 2) << r.Describe();
  EXPECT_EQ(Lines(r.err)[0], "flag provided but not defined: -no-such-flag");
}

TEST(CliTest, MissingConfig) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{}, {"--log-level", "debug"}, {"--config="}}) {
    CmdResult r = RunWrapper(args);
    EXPECT_EQ(r.rc, 2) << ::testing::PrintToString(args) << "\n" << r.Describe();
    EXPECT_TRUE(Contains(r.err, "--config")) << r.Describe();
    EXPECT_EQ(r.out, "");
  }
}

TEST(CliTest, BadFlagValues) {
  struct Case {
    std::vector<std::string> args;
    std::string first_line;
  };
  std::vector<Case> cases = {
      {{"--etcd-wrapper-port", "abc", "--config", "x"},
       "invalid value \"abc\" for flag -etcd-wrapper-port: parse error"},
      {{"--etcd-wrapper-port=", "--config", "x"},
       "invalid value \"\" for flag -etcd-wrapper-port: parse error"},
      {{"--config"}, "flag needs an argument: -config"},
      {{"--version=maybe"}, "invalid boolean value \"maybe\" for -version: parse error"},
      {{"--etcd-wrapper-port", "70000", "--config", "x"}, ""},
      {{"--etcd-wrapper-port", "0", "--config", "x"}, ""},
      {{"--config", "x", "--log-level", "loud"}, ""},
      {{"--config", "x", "extra"}, ""},
      {{"---config", "x"}, "bad flag syntax: ---config"},
  };
  for (const auto& c : cases) {
    CmdResult r = RunWrapper(c.args);
    EXPECT_EQ(r.rc, 2) << ::testing::PrintToString(c.args) << "\n" << r.Describe();
    EXPECT_EQ(r.out, "");
    ASSERT_FALSE(r.err.empty()) << ::testing::PrintToString(c.args);
    if (!c.first_line.empty()) {
      EXPECT_EQ(Lines(r.err)[0], c.first_line) << r.err;
      EXPECT_EQ(Lines(r.err)[1], "Usage of etcd-wrapper:") << r.err;
    }
  }
  CmdResult r = RunWrapper({"--config", "x", "--log-level", "loud"});
  EXPECT_TRUE(Contains(r.err, "--log-level")) << r.err;
  EXPECT_TRUE(Contains(r.err, "loud")) << r.err;
  r = RunWrapper({"--etcd-wrapper-port", "70000", "--config", "x"});
  EXPECT_TRUE(Contains(r.err, "--etcd-wrapper-port")) << r.err;
}

// Runs etcd-wrapper on a config that must be rejected: exit 1 and exactly one line on stderr,
// "etcd-wrapper: <problem>" (docs/configuration.md), containing every string in `want`.
void ExpectConfigRejected(const std::string& config_path, const std::vector<std::string>& want,
                          const std::string& what) {
  SCOPED_TRACE(what);
  CmdResult r = RunWrapper({"--config", config_path}, std::chrono::seconds(15));
  ASSERT_EQ(r.rc, 1) << r.Describe();
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(Lines(r.err).size(), 1u) << r.err;
  const std::string line = Lines(r.err)[0];
  EXPECT_EQ(line.rfind("etcd-wrapper: ", 0), 0u) << line;
  for (const auto& w : want) EXPECT_TRUE(Contains(line, w)) << "\"" << w << "\" not in " << line;
}

TEST(CliTest, BadConfigFiles) {
  TempDir dir;
  std::string file = dir.File("regular-file");
  WriteFile(file, "x");

  struct Case {
    std::string what;
    Settings overrides;
    std::vector<std::string> want;
  };
  std::vector<Case> cases = {
      {"bad URL scheme",
       {{"listen-client-urls", "ftp://127.0.0.1:2379"}},
       {"listen-client-urls", "scheme", "ftp://127.0.0.1:2379"}},
      {"bad URL port",
       {{"listen-client-urls", "http://127.0.0.1:99999"}},
       {"listen-client-urls", "port", "99999"}},
      {"URL without scheme",
       {{"advertise-client-urls", "127.0.0.1:2379"}},
       {"advertise-client-urls"}},
      {"bad initial-cluster-state",
       {{"initial-cluster-state", "bogus"}},
       {"initial-cluster-state", "bogus", "new or existing"}},
      {"election timeout too short",
       {{"heartbeat-interval", "100"}, {"election-timeout", "400"}},
       {"election-timeout", "400ms", "5 times", "heartbeat-interval"}},
      {"election timeout not an integer",
       {{"election-timeout", "soon"}},
       {"election-timeout", "soon", "integer"}},
      {"negative snapshot-count", {{"snapshot-count", "-3"}}, {"snapshot-count", "negative"}},
      {"bad log-level", {{"log-level", "verbose"}}, {"log-level", "verbose"}},
      {"bad auto-compaction-mode",
       {{"auto-compaction-mode", "daily"}},
       {"auto-compaction-mode", "daily"}},
      {"list where a value is expected", {{"name", "[a, b]"}}, {"name", "single value"}},
      {"data-dir is a regular file", {{"data-dir", file}}, {"data-dir", file, "not a directory"}},
      {"data-dir below a regular file",
       {{"data-dir", file + "/data"}},
       {"data-dir", file + "/data", "Not a directory"}},
      {"initial-cluster without this member",
       {{"initial-cluster", "other=http://127.0.0.1:1"}},
       {"initial-cluster", "default"}},
  };
  int n = 0;
  for (const auto& c : cases) {
    std::string path = WriteConfig(dir, c.overrides, "config-" + std::to_string(++n) + ".yaml");
    ExpectConfigRejected(path, c.want, c.what);
  }
  // Nothing was created for the rejected configurations.
  EXPECT_EQ(ReadFile(file), "x");
  EXPECT_NE(access(dir.File("data").c_str(), F_OK), 0);
}

TEST(CliTest, UnparsableYaml) {
  TempDir dir;
  std::string path = dir.File("bad.yaml");
  WriteFile(path, "name: default\nlisten-client-urls: [http://127.0.0.1:1\ndata-dir: x\n");
  ExpectConfigRejected(path, {path, "invalid YAML at line", "column"}, "unclosed flow sequence");
  WriteFile(path, "name: default\n\tdata-dir: x\n");
  ExpectConfigRejected(path, {"invalid YAML at line 2, column"}, "tab indentation");
  WriteFile(path, "- a\n- b\n");
  ExpectConfigRejected(path, {"must be a map"}, "a list");
}

TEST(CliTest, UnreadableConfigPath) {
  TempDir dir;
  ExpectConfigRejected(dir.File("missing.yaml"),
                       {dir.File("missing.yaml"), "cannot be read", "No such file"}, "missing");
  // A directory is not a config file (an ifstream would read it as empty: every default).
  ExpectConfigRejected(dir.path(), {dir.path(), "cannot be read", "directory"}, "directory");
  std::string file = dir.File("f");
  WriteFile(file, "x");
  ExpectConfigRejected(file + "/config.yaml", {file + "/config.yaml", "cannot be read"},
                       "below a file");
}

TEST(CliTest, UnknownConfigKeysAreLoggedAndIgnored) {
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start({{"no-such-key", "1"}, {"enable-v2", "true"}})) << m.log();
  ASSERT_TRUE(m.client().Put("k", "v").ok());
  ASSERT_EQ(m.Stop(), 0) << m.log();
  std::string log = m.log();
  ExpectJsonLogLines(log);
  auto unknown = LogsWithMsg(log, "unknown config key ignored");
  ASSERT_EQ(unknown.size(), 1u) << log;
  EXPECT_EQ(unknown[0]["key"], "no-such-key");
  EXPECT_EQ(unknown[0]["level"], "warn");
  auto inert = LogsWithMsg(log, "config key accepted without effect");
  ASSERT_EQ(inert.size(), 1u) << log;
  EXPECT_EQ(inert[0]["key"], "enable-v2");
}

TEST(CliTest, LogsAreJsonLines) {
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start()) << m.log();
  ASSERT_TRUE(m.client().Put("k", "v").ok());
  ASSERT_EQ(m.Stop(), 0) << m.log();
  std::string log = m.log();
  ExpectJsonLogLines(log);
  auto ready = LogsWithMsg(log, "etcd server is now ready to serve client requests");
  ASSERT_EQ(ready.size(), 1u) << log;
  EXPECT_EQ(ready[0]["level"], "info");
  EXPECT_EQ(ready[0]["client-urls"], m.url());
  auto started = LogsWithMsg(log, "etcd member started");
  ASSERT_EQ(started.size(), 1u) << log;
  EXPECT_TRUE(std::regex_match(started[0].value("member-id", ""), std::regex("^[0-9a-f]{16}$")))
      << started[0].dump();
  EXPECT_EQ(LogsWithMsg(log, "stopped").size(), 1u) << log;
  // Info is the default level.
  for (auto& j : JsonLines(log)) EXPECT_NE(j["level"], "debug") << j.dump();
}

// The binary is linked with jemalloc (docs/performance.md): a build that lost it, for example to
// a linker dropping an unreferenced library, would still work but cost 10-15% more CPU per write.
TEST(CliTest, TheServerAllocatesWithJemalloc) {
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start()) << m.log();
  std::string maps = ReadFile("/proc/" + std::to_string(m.process().pid()) + "/maps");
  ASSERT_FALSE(maps.empty());
  EXPECT_NE(maps.find("/libjemalloc.so"), std::string::npos) << maps;
  ASSERT_EQ(m.Stop(), 0) << m.log();
}

TEST(CliTest, LogLevels) {
  {
    Member m(Member::Kind::kEtcdWrapper);
    m.set_extra_args({"--log-level", "debug"});
    ASSERT_TRUE(m.Start()) << m.log();
    ASSERT_EQ(m.Stop(), 0) << m.log();
    ExpectJsonLogLines(m.log());
    auto loaded = LogsWithMsg(m.log(), "configuration loaded");
    ASSERT_EQ(loaded.size(), 1u) << m.log();
    EXPECT_EQ(loaded[0]["level"], "debug");
    EXPECT_EQ(loaded[0]["data-dir"], m.data_dir());
  }
  {
    // The config file's level, with the config file's own messages at that level too.
    Member m(Member::Kind::kEtcdWrapper);
    ASSERT_TRUE(m.Start({{"log-level", "warn"}, {"enable-v2", "true"}, {"bogus", "1"}})) << m.log();
    ASSERT_TRUE(m.client().Put("k", "v").ok());
    ASSERT_EQ(m.Stop(), 0) << m.log();
    std::string log = m.log();
    ExpectJsonLogLines(log);
    for (auto& j : JsonLines(log)) EXPECT_EQ(j["level"], "warn") << j.dump();
    EXPECT_EQ(LogsWithMsg(log, "unknown config key ignored").size(), 1u) << log;
  }
  {
    // The flag overrides the file.
    Member m(Member::Kind::kEtcdWrapper);
    m.set_extra_args({"--log-level=error"});
    ASSERT_TRUE(m.Start({{"log-level", "debug"}})) << m.log();
    ASSERT_EQ(m.Stop(), 0) << m.log();
    EXPECT_EQ(NonEmptyLines(m.log()).size(), 0u) << m.log();
  }
  CmdResult r = RunWrapper({"--config", "x.yaml", "--log-level", "chatty"});
  EXPECT_EQ(r.rc, 2) << r.Describe();
  EXPECT_TRUE(Contains(r.err, "chatty")) << r.err;
}

TEST(CliTest, SigtermStopsGracefullyAndDataPersists) {
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start()) << m.log();
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(m.client().Put("key" + std::to_string(i), "value" + std::to_string(i)).ok());
  }
  etcdserverpb::RangeResponse before;
  ASSERT_TRUE(m.client().Get("key", &before, "kez").ok());
  auto rc = m.Stop();
  ASSERT_TRUE(rc.has_value()) << "no exit after SIGTERM\n" << m.log();
  EXPECT_EQ(*rc, 0) << m.log();
  auto caught = LogsWithMsg(m.log(), "caught shutdown signal");
  ASSERT_EQ(caught.size(), 1u) << m.log();
  EXPECT_EQ(caught[0]["signal"], "terminated");

  ASSERT_TRUE(m.Start()) << m.log();
  etcdserverpb::RangeResponse after;
  ASSERT_TRUE(m.client().Get("key", &after, "kez").ok());
  EXPECT_EQ(after.count(), 20);
  EXPECT_EQ(after.header().revision(), before.header().revision());
  ASSERT_EQ(after.kvs_size(), before.kvs_size());
  for (int i = 0; i < after.kvs_size(); ++i) {
    EXPECT_EQ(after.kvs(i).SerializeAsString(), before.kvs(i).SerializeAsString());
  }
  m.process().Signal(SIGINT);
  EXPECT_EQ(m.process().Wait(std::chrono::seconds(20)), 0) << m.log();
}

TEST(CliTest, StopIsPromptWithIdleClientsAndOpenStreams) {
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start()) << m.log();
  // A client that stays connected after a call, and an open watch stream: neither may hold up
  // a graceful stop (gRPC alone would wait for idle connections until its deadline).
  Client idle(m.NewChannel());
  ASSERT_TRUE(idle.Put("k", "v").ok());
  grpc::ClientContext watch_ctx;
  auto watch = idle.watch->Watch(&watch_ctx);
  ASSERT_TRUE(watch->Write(testsupport::CreateWatch("k")));
  etcdserverpb::WatchResponse created;
  ASSERT_TRUE(watch->Read(&created));
  ASSERT_TRUE(created.created());
  auto start = std::chrono::steady_clock::now();
  m.process().Signal(SIGTERM);
  auto rc = m.process().Wait(std::chrono::seconds(20));
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(rc.has_value()) << m.log();
  EXPECT_EQ(*rc, 0) << m.log();
  EXPECT_LT(took, std::chrono::milliseconds(1500)) << m.log();
  // The watch stream ends instead of hanging.
  etcdserverpb::WatchResponse more;
  while (watch->Read(&more)) {
  }
  watch->Finish();
}

TEST(CliTest, SecondSignalExitsWithOne) {
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start()) << m.log();
  // An open watch stream keeps the graceful stop busy for its grace period.
  grpc::ClientContext ctx;
  auto stream = m.client().watch->Watch(&ctx);
  ASSERT_TRUE(stream->Write(testsupport::CreateWatch("k")));
  etcdserverpb::WatchResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_TRUE(resp.created());
  // Two different signals, so that they cannot merge into one pending signal.
  ::kill(m.process().pid(), SIGTERM);
  ::kill(m.process().pid(), SIGINT);
  auto rc = m.process().Wait(std::chrono::seconds(20));
  ASSERT_TRUE(rc.has_value()) << m.log();
  EXPECT_EQ(*rc, 1) << m.log();
  EXPECT_EQ(LogsWithMsg(m.log(), "second stop signal, exiting immediately").size(), 1u) << m.log();
  ctx.TryCancel();
  // The store opens again after the abrupt exit.
  ASSERT_TRUE(m.Start()) << m.log();
}

TEST(CliTest, Sigusr1IsIgnored) {
  Member m(Member::Kind::kEtcdWrapper);
  ASSERT_TRUE(m.Start()) << m.log();
  m.process().Signal(SIGUSR1);
  ASSERT_TRUE(m.client().Put("k", "v").ok());
  EXPECT_TRUE(m.Running());
  auto rc = m.Stop();
  ASSERT_TRUE(rc.has_value()) << "SIGTERM ignored after SIGUSR1\n" << m.log();
  EXPECT_EQ(*rc, 0) << m.log();
}

TEST(CliTest, ExitCodeFile) {
  Member m(Member::Kind::kEtcdWrapper);
  std::string path = m.dir() + "/exit_code";
  m.set_extra_args({"--exit-code-file", path});
  ASSERT_TRUE(m.Start()) << m.log();
  EXPECT_EQ(access(path.c_str(), F_OK), -1) << "written before any signal";
  ASSERT_EQ(m.Stop(), 0) << m.log();
  EXPECT_EQ(ReadFile(path), "terminated");

  ASSERT_TRUE(m.Start()) << m.log();
  m.process().Signal(SIGINT);
  EXPECT_EQ(m.process().Wait(std::chrono::seconds(20)), 0) << m.log();
  EXPECT_EQ(ReadFile(path), "interrupt");

  // --exit-code-file=PATH form; an unwritable path is logged, the stop is still graceful.
  m.set_extra_args({"--exit-code-file=" + m.dir() + "/no/such/dir/exit_code"});
  ASSERT_TRUE(m.Start()) << m.log();
  ASSERT_EQ(m.Stop(), 0) << m.log();
  EXPECT_EQ(LogsWithMsg(m.log(), "failed to capture exit code").size(), 1u) << m.log();
}

// A listening socket on a free loopback port; closed when destroyed.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    for (int attempt = 0; attempt < 20 && port_ < 0; ++attempt) {
      int port = FreePort();
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(port));
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          ::listen(fd_, 16) == 0) {
        port_ = port;
      }
    }
  }
  ~Listener() { ::close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = -1;
};

TEST(CliTest, ClientPortInUse) {
  Listener busy;
  ASSERT_GT(busy.port(), 0);
  TempDir dir;
  std::string url = "http://127.0.0.1:" + std::to_string(busy.port());
  std::string path =
      WriteConfig(dir, {{"listen-client-urls", url}, {"advertise-client-urls", url}});
  CmdResult r = RunWrapper({"--config", path}, std::chrono::seconds(20));
  ASSERT_EQ(r.rc, 1) << r.Describe();
  EXPECT_EQ(r.out, "");
  ExpectJsonLogLines(r.err);
  auto errors = LogsWithMsg(r.err, "cannot serve clients");
  ASSERT_EQ(errors.size(), 1u) << r.err;
  EXPECT_EQ(errors[0]["level"], "error");
  EXPECT_TRUE(Contains(errors[0].value("error", ""), url)) << errors[0].dump();
  EXPECT_TRUE(Contains(errors[0].value("error", ""), "listen-client-urls")) << errors[0].dump();
}

}  // namespace
}  // namespace etcdw::testing

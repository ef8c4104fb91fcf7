// Helpers shared by the end-to-end tests: running etcdctl and etcd-wrapper, parsing JSON.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process.h"
#include "servers.h"

namespace etcdw::testing {

// What a finished command produced.
struct CmdResult {
  int rc = -1;
  std::string out;  // stdout
  std::string err;  // stderr
  std::string Describe() const {
    return "exit " + std::to_string(rc) + "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
  }
};

// Runs etcdctl (API v3) against `endpoints` (host:port[,host:port]).
inline CmdResult Etcdctl(const std::string& endpoints, const std::vector<std::string>& args,
                         const std::string& input = "",
                         std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  std::vector<std::string> argv = {"etcdctl", "--endpoints=" + endpoints, "--command-timeout=20s"};
  argv.insert(argv.end(), args.begin(), args.end());
  CmdResult r;
  r.rc = RunCommandSplit(argv, &r.out, &r.err, timeout, input);
  return r;
}

inline CmdResult Etcdctl(const Member& m, const std::vector<std::string>& args,
                         const std::string& input = "") {
  return Etcdctl(m.endpoint(), args, input);
}

// Runs etcd-wrapper with `args` to completion.
inline CmdResult RunWrapper(const std::vector<std::string>& args,
                            std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  std::vector<std::string> argv = {EtcdWrapperBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  CmdResult r;
  r.rc = RunCommandSplit(argv, &r.out, &r.err, timeout);
  return r;
}

// Parses JSON, failing the test (and returning null) when the text is not JSON.
inline nlohmann::json ParseJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << "not JSON: " << text;
  return j.is_discarded() ? nlohmann::json() : j;
}

// Every line of `text` that parses as a JSON object.
inline std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    auto j = nlohmann::json::parse(text.substr(start, end - start), nullptr, false);
    if (!j.is_discarded() && j.is_object()) out.push_back(std::move(j));
    start = end + 1;
  }
  return out;
}

// The JSON log lines of `text` with the given msg.
inline std::vector<nlohmann::json> LogsWithMsg(const std::string& text, const std::string& msg) {
  std::vector<nlohmann::json> out;
  for (auto& j : JsonLines(text)) {
    if (j.value("msg", "") == msg) out.push_back(j);
  }
  return out;
}

// Lines of `text` (without the newlines).
inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// The "Error: ..." line etcdctl prints on stderr when a command fails.
inline std::string ErrorLine(const std::string& err) {
  for (const auto& line : Lines(err)) {
    if (line.rfind("Error:", 0) == 0) return line;
  }
  return "";
}

// The auth scenario the snapshot tests carry between etcd and us: root with the root role,
// alice reading the prefix "pub/" only, authentication enabled.
inline const std::vector<std::vector<std::string>>& SnapshotAuthSetup() {
  static const std::vector<std::vector<std::string>> setup = {
      {"user", "add", "root:rootpw"},
      {"user", "grant-role", "root", "root"},
      {"user", "add", "alice:alicepw"},
      {"role", "add", "reader"},
      {"role", "grant-permission", "reader", "read", "pub/", "--prefix=true"},
      {"user", "grant-role", "alice", "reader"},
      {"auth", "enable"}};
  return setup;
}
// What each user of SnapshotAuthSetup may and may not do: the commands both servers must
// answer alike.
inline const std::vector<std::vector<std::string>>& SnapshotAuthChecks() {
  static const std::vector<std::vector<std::string>> checks = {
      {"get", "secret"},
      {"--user", "alice:alicepw", "get", "pub/1"},
      {"--user", "alice:alicepw", "get", "secret"},
      {"--user", "alice:wrong", "get", "pub/1"},
      {"--user", "root:rootpw", "get", "secret"},
      {"--user", "root:rootpw", "user", "list"},
      {"--user", "root:rootpw", "role", "get", "reader"}};
  return checks;
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace etcdw::testing

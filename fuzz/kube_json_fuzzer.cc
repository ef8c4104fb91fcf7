// Feeds the Kubernetes client's decoding of what the API server and the configuration say:
// a Lease object (LeaseFromJson), an error answer (ApiError with its Status object), a kubeconfig
// file (LoadKubeconfig) with its server address (ParseServerUrl), and the MicroTime text the
// member lease is renewed with. Beyond not crashing, it checks that:
// - a Lease that decodes, encoded again (its object dumped, as UpdateLease sends it), decodes
//   to the same lease; one that does not decode is InvalidArgument with a message;
// - an error answer is never Ok, its message is "<method> <path>: <text> (HTTP <code>)" with
//   the Status object's message when there is one, else the answer's text (at most 200 bytes
//   of it), and its code is CodeForHttpStatus's for the status and the Status's reason;
// - a kubeconfig loads or fails with a message naming the file; one that loads has a server,
//   absolute file paths (relative ones are resolved against the file), and written again as a
//   JSON kubeconfig from what it loaded (the -data fields base64-encoded) loads the same; a
//   server address that parses has a host and a port, and TLS exactly for https;
// - MicroTime formats any instant as 27 characters, "YYYY-MM-DDTHH:MM:SS.ffffffZ", that read
//   back (by this harness's own reading) to the instant floored to the microsecond.
// Input: byte 0 % 4 chooses lease, error answer, kubeconfig or MicroTime; the rest is its JSON,
// (two bytes of HTTP status and) the answer, the file, or 8 bytes of nanoseconds since 1970.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/kube/client.h"
#include "kube/api_error.h"
#include "kube/server_url.h"
#include "scratch_dir.h"

// lease.cc's client calls name KubeClient::Call (client.cc: the HTTP client and TLS), which the
// harness never calls.
namespace etcdw::kube {
Result<nlohmann::json> KubeClient::Call(const std::string& /*method*/, const std::string& /*path*/,
                                        const std::string& /*body*/,
                                        const std::string& /*content_type*/) {
  std::abort();
}
}  // namespace etcdw::kube

namespace {

using etcdw::Code;
using etcdw::Status;
using nlohmann::json;
namespace kube = etcdw::kube;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "kube_json_fuzzer: %s\n", what);
  std::abort();
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

void CheckLease(std::string_view in) {
  const json object = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return;
  auto lease = kube::LeaseFromJson(object);
  if (!lease.ok()) {
    if (lease.status().code() != Code::kInvalidArgument) Fail("a Lease refused otherwise");
    if (lease.status().message().empty()) Fail("a Lease refused without a message");
    return;
  }
  if (lease->name.empty()) Fail("a Lease without a name decoded");
  const json again = json::parse(lease->object.dump(), nullptr, /*allow_exceptions=*/false);
  if (again != object) Fail("a Lease's object does not encode to itself");
  auto back = kube::LeaseFromJson(again);
  if (!back.ok()) Fail("a Lease encoded again does not decode");
  if (back->name != lease->name || back->namespace_name != lease->namespace_name ||
      back->resource_version != lease->resource_version ||
      back->holder_identity != lease->holder_identity || back->renew_time != lease->renew_time ||
      back->annotations != lease->annotations || back->object != lease->object) {
    Fail("a Lease encoded again decodes to another lease");
  }
}

void CheckApiError(std::string_view in) {
  if (in.size() < 2) return;
  const int http = 100 + (static_cast<uint8_t>(in[0]) | static_cast<uint8_t>(in[1]) << 8) % 500;
  const std::string body(in.substr(2));
  const std::string path = "/apis/coordination.k8s.io/v1/namespaces/n/leases/l";
  const std::string head = "PUT " + path + ": ";
  const std::string tail = " (HTTP " + std::to_string(http) + ")";
  const Status st = kube::ApiError("PUT", path, http, body);
  if (st.ok()) Fail("an error answer is Ok");
  const std::string& m = st.message();
  if (!StartsWith(m, head) || !EndsWith(m, tail) || m.size() == head.size() + tail.size()) {
    Fail("an error's message is not \"<method> <path>: <text> (HTTP <code>)\"");
  }
  const std::string text = m.substr(head.size(), m.size() - head.size() - tail.size());
  const json status = json::parse(body, nullptr, /*allow_exceptions=*/false);
  const bool is_status = status.is_object() && status.value("kind", json()) == "Status";
  std::string message, reason;
  if (is_status) {
    if (auto it = status.find("message"); it != status.end() && it->is_string()) message = *it;
    if (auto it = status.find("reason"); it != status.end() && it->is_string()) reason = *it;
  }
  if (st.code() != kube::CodeForHttpStatus(http, reason)) Fail("an error's code is not its own");
  if (!message.empty()) {
    if (text != message) Fail("an error's text is not the Status's message");
    return;
  }
  const std::string_view trimmed = etcdw::common::Trim(body);
  if (trimmed.empty()) return;  // the reason phrase
  if (trimmed.size() <= 200 ? text != trimmed
                            : text != std::string(trimmed.substr(0, 200)) + "...") {
    Fail("an error's text is not the answer's text");
  }
}

// Base64 (standard, padded), to write a kubeconfig's -data fields.
std::string Base64(std::string_view data) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < data.size(); i += 3) {
    uint32_t group = static_cast<uint8_t>(data[i]) << 16;
    if (i + 1 < data.size()) group |= static_cast<uint8_t>(data[i + 1]) << 8;
    if (i + 2 < data.size()) group |= static_cast<uint8_t>(data[i + 2]);
    for (size_t k = 0; k < 4; ++k) {
      out += i + k <= data.size() ? kAlphabet[(group >> (18 - 6 * k)) & 63] : '=';
    }
  }
  return out;
}

void Write(const std::string& path, std::string_view data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) Fail("cannot write the kubeconfig");
}

bool SameConfig(const kube::KubeConfig& a, const kube::KubeConfig& b) {
  return a.server == b.server && a.ca_file == b.ca_file && a.ca_pem == b.ca_pem &&
         a.insecure_skip_tls_verify == b.insecure_skip_tls_verify && a.token == b.token &&
         a.token_file == b.token_file && a.cert_file == b.cert_file && a.cert_pem == b.cert_pem &&
         a.key_file == b.key_file && a.key_pem == b.key_pem &&
         a.default_namespace == b.default_namespace;
}

void CheckServerUrl(const std::string& server) {
  auto url = kube::ParseServerUrl(server);
  if (!url.ok()) {
    if (url.status().code() != Code::kInvalidArgument || url.status().message().empty()) {
      Fail("a server address refused otherwise than InvalidArgument with a message");
    }
    return;
  }
  if (url->tls != StartsWith(server, "https://")) Fail("TLS is not exactly https's");
  const size_t colon = url->host_port.rfind(':');
  if (colon == std::string::npos || colon == 0) Fail("a server address without a host");
  const std::string port = url->host_port.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != port.npos ||
      std::stoi(port) < 1 || std::stoi(port) > 65535) {
    Fail("a server address without a port");
  }
  if (!url->prefix.empty() && (url->prefix.front() != '/' || url->prefix.back() == '/')) {
    Fail("a prefix that does not start with '/' or ends with one");
  }
}

void CheckKubeconfig(std::string_view in) {
  const std::string dir = etcdw::fuzz::ScratchDir("kube_json_fuzzer");
  const std::string path = dir + "/kubeconfig";
  Write(path, in);
  auto config = kube::LoadKubeconfig(path);
  if (!config.ok()) {
    const Status& st = config.status();
    if (st.code() != Code::kInvalidArgument) Fail("a kubeconfig refused otherwise");
    if (st.message().find(path) == std::string::npos) Fail("an error that does not name the file");
    return;
  }
  const kube::KubeConfig& c = *config;
  if (c.server.empty()) Fail("a kubeconfig without a server loaded");
  if (c.source != path) Fail("a kubeconfig's source is not its path");
  for (const std::string* file : {&c.ca_file, &c.token_file, &c.cert_file, &c.key_file}) {
    if (!file->empty() && file->front() != '/') Fail("a relative path was not resolved");
  }
  CheckServerUrl(c.server);

  // Written again from what it loaded. Text that JSON cannot hold (not UTF-8) is left out.
  json user = {{"token", c.token},
               {"tokenFile", c.token_file},
               {"client-certificate", c.cert_file},
               {"client-certificate-data", Base64(c.cert_pem)},
               {"client-key", c.key_file},
               {"client-key-data", Base64(c.key_pem)}};
  json cluster = {{"server", c.server},
                  {"certificate-authority", c.ca_file},
                  {"certificate-authority-data", Base64(c.ca_pem)},
                  {"insecure-skip-tls-verify", c.insecure_skip_tls_verify}};
  json context = {{"cluster", "c"}, {"user", "u"}, {"namespace", c.default_namespace}};
  json written = {{"current-context", "x"},
                  {"contexts", {{{"name", "x"}, {"context", context}}}},
                  {"clusters", {{{"name", "c"}, {"cluster", cluster}}}},
                  {"users", {{{"name", "u"}, {"user", user}}}}};
  std::string text;
  try {
    text = written.dump();
  } catch (const json::type_error&) {
    return;
  }
  Write(path, text);
  auto again = kube::LoadKubeconfig(path);
  if (!again.ok()) {
    std::fprintf(stderr, "%s\n%s\n", text.c_str(), again.status().message().c_str());
    Fail("a kubeconfig written again from what it loaded does not load");
  }
  if (!SameConfig(c, *again)) {
    std::fprintf(stderr, "%s\n", text.c_str());
    Fail("a kubeconfig written again loads to another configuration");
  }
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil,
// written out again here).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void CheckMicroTime(std::string_view in) {
  int64_t ns = 0;
  std::memcpy(&ns, in.data(), std::min(in.size(), sizeof ns));
  const std::chrono::system_clock::time_point t{
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::nanoseconds(ns))};
  const std::string text = kube::MicroTime(t);
  static constexpr char kShape[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";
  if (text.size() != sizeof kShape - 1) Fail("a MicroTime is not 27 characters");
  for (size_t i = 0; i < text.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (kShape[i] == 'd' ? !digit : text[i] != kShape[i]) Fail("a MicroTime of another shape");
  }
  const auto num = [&text](size_t at, size_t n) { return std::stoll(text.substr(at, n)); };
  const int64_t month = num(5, 2), day = num(8, 2), hour = num(11, 2), minute = num(14, 2),
                second = num(17, 2);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 59) {
    Fail("a MicroTime out of its fields' ranges");
  }
  const int64_t secs =
      DaysFromCivil(num(0, 4), month, day) * 86400 + hour * 3600 + minute * 60 + second;
  const int64_t micros = secs * 1000000 + num(20, 6);
  const int64_t want = ns / 1000 - (ns % 1000 < 0 ? 1 : 0);  // floored
  if (micros != want) Fail("a MicroTime does not read back to its instant");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      CheckLease(in);
      break;
    case 1:
      CheckApiError(in);
      break;
    case 2:
      CheckKubeconfig(in);
      break;
    default:
      CheckMicroTime(in);
      break;
  }
  return 0;
}

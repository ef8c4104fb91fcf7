// Feeds the pure parsing on both sides of the wrapper-sidecar protocol arbitrary bytes: the
// HTTP server's split of a request target into path and query (SplitTarget: every request to
// the sidecar's API and to the wrapper's control server goes through it) and the wrapper's
// reading of the sidecar's /initialization/status answer (ParseInitState). The sidecar's routing
// (HttpApi::Handle) is sidecar_http_api's.
// Beyond not crashing, it checks that:
// - the path is the target up to its '?', and a query made of the input's names and values,
//   percent-encoded, decodes to them (the first value of a name wins);
// - a name or value without escapes ('%', '+') decodes to itself;
// - ParseInitState reads back each state's name, and any other answer is "in progress".
// Input: the target; its bytes after the first NUL, if any, are also name and value pairs
// (split at NUL bytes) for the encoded query, and the answer for ParseInitState.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/http_util.h"
#include "etcdw/wrapper/sidecar_client.h"

namespace {

using etcdw::wrapper::InitState;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "sidecar_answers_fuzzer: %s\n", what);
  std::abort();
}

// Percent-encodes every byte but letters and digits.
std::string Escape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if ((b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) {
      out += c;
    } else {
      out += '%';
      out += kHex[b >> 4];
      out += kHex[b & 15];
    }
  }
  return out;
}

void CheckRawTarget(const std::string& target) {
  std::string path;
  std::map<std::string, std::string> query;
  etcdw::common::SplitTarget(target, &path, &query);
  const size_t q = target.find('?');
  if (path != target.substr(0, q)) Fail("the path is not the target up to its '?'");
  if (q == std::string::npos) {
    if (!query.empty()) Fail("a query without a '?'");
    return;
  }
  // Pairs without escapes decode to themselves, the first of a name winning.
  std::map<std::string, std::string> plain;
  std::string_view rest = std::string_view(target).substr(q + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string name(pair.substr(0, eq));
    const std::string value(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (pair.find_first_of("%+") == std::string_view::npos) plain.emplace(name, value);
  }
  // Without any escape the query is exactly those pairs; with some, an escaped pair decoding to
  // a name may come before its plain one, but every plain name is there.
  if (target.find_first_of("%+", q) == std::string::npos && query != plain) {
    Fail("a query without escapes does not decode to its pairs");
  }
  for (const auto& [name, value] : plain) {
    if (query.count(name) == 0) Fail("a name without escapes is missing");
  }
}

void CheckEncodedQuery(const std::vector<std::string>& pairs) {
  std::string target = "/initialization/start";
  std::map<std::string, std::string> want;
  for (size_t k = 0; k + 1 < pairs.size(); k += 2) {
    target += k == 0 ? '?' : '&';
    target += Escape(pairs[k]) + "=" + Escape(pairs[k + 1]);
    want.emplace(pairs[k], pairs[k + 1]);
  }
  std::string path;
  std::map<std::string, std::string> query;
  etcdw::common::SplitTarget(target, &path, &query);
  if (path != "/initialization/start") Fail("an encoded query changed the path");
  if (query != want) Fail("an encoded query does not decode to its names and values");
}

void CheckInitState(const std::string& answer) {
  for (InitState s :
       {InitState::kNew, InitState::kInProgress, InitState::kSuccessful, InitState::kFailed}) {
    if (etcdw::wrapper::ParseInitState(etcdw::wrapper::InitStateName(s)) != s) {
      Fail("a state's name does not read back");
    }
  }
  const InitState s = etcdw::wrapper::ParseInitState(answer);
  if (s != InitState::kInProgress && answer != etcdw::wrapper::InitStateName(s)) {
    Fail("an answer other than a state's name is not in progress");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string target(in.substr(0, nul));
  CheckRawTarget(target);
  if (nul == std::string_view::npos) return 0;

  const std::string_view rest = in.substr(nul + 1);
  std::vector<std::string> pairs;
  for (size_t at = 0; at <= rest.size();) {
    const size_t end = std::min(rest.find('\0', at), rest.size());
    pairs.emplace_back(rest.substr(at, end - at));
    at = end + 1;
  }
  CheckEncodedQuery(pairs);
  CheckInitState(std::string(rest));
  return 0;
}

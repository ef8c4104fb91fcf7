// Feeds both binaries' command-line parsing arbitrary argument lists: the input split at NUL
// bytes into arguments, parsed by the flags of etcd-wrapper start-etcd (byte 0 even) or of an
// etcdbrctl command (byte 0 odd; which one: byte 0 / 2), then the options checked as main()
// checks them (ValidateStartEtcdOptions; FinishServerFlags, ValidateServerOptions, LogLevelOf,
// WarnFlagsWithoutEffect). Beyond not crashing, it checks that:
// - an error comes with Go's message and success without one, and the arguments left over are a
//   tail of the argument list (parsing stops at "--" or the first non-flag);
// - parsing the same arguments again gives the same outcome, error and arguments left over;
// - every argument that parses as a Go duration formats (FormatGoDuration) to text that parses
//   back to the same duration.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "etcdw/common/flags.h"
#include "etcdw/common/logging.h"
#include "etcdw/sidecar/options.h"
#include "etcdw/wrapper/options.h"

namespace {

using etcdw::common::FlagSet;
using Outcome = FlagSet::Outcome;
namespace sidecar = etcdw::sidecar;
namespace wrapper = etcdw::wrapper;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "flags_fuzzer: %s\n", what);
  std::abort();
}

// Registers the flags of the program `which` picks into `flags`, with its options in the
// returned holder, and after a successful parse checks the options as main() does.
struct Program {
  explicit Program(uint8_t which) : wrapper(which % 2 == 0), command(CommandOf(which / 2)) {
    if (wrapper) {
      wrapper::RegisterStartEtcdFlags(flags, &start_etcd);
    } else {
      sidecar::RegisterFlags(command, flags, &server);
    }
  }
  static sidecar::Command CommandOf(uint8_t k) {
    switch (k % 5) {
      case 0:
        return sidecar::Command::kServer;
      case 1:
        return sidecar::Command::kSnapshot;
      case 2:
        return sidecar::Command::kRestore;
      case 3:
        return sidecar::Command::kCompact;
      default:
        return sidecar::Command::kInitialize;
    }
  }
  void CheckOptions() {
    if (wrapper) {
      (void)wrapper::ValidateStartEtcdOptions(start_etcd);
      (void)start_etcd.SidecarBaseUrl();
      (void)start_etcd.SidecarServerName();
      return;
    }
    sidecar::FinishServerFlags(&server);
    const etcdw::Status st = sidecar::ValidateServerOptions(server);
    if (!st.ok() && st.message().empty()) Fail("invalid options without a message");
    (void)sidecar::LogLevelOf(server.log_level);
    (void)sidecar::WarnFlagsWithoutEffect(command, flags);
    (void)server.EffectiveCompression();
  }

  const bool wrapper;
  const sidecar::Command command;
  FlagSet flags{"fuzz"};
  wrapper::StartEtcdOptions start_etcd;
  sidecar::ServerOptions server;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  // Options found wrong are logged; a fuzzer would print millions of lines.
  etcdw::log::SetLevel(etcdw::log::Level::kOff);
  std::vector<std::string> args;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (size_t at = 0; at <= in.size() && !in.empty();) {
    const size_t nul = std::min(in.find('\0', at), in.size());
    args.emplace_back(in.substr(at, nul - at));
    at = nul + 1;
  }

  Program p(data[0]);
  const FlagSet::ParseResult r = p.flags.Parse(args);
  if ((r.outcome == Outcome::kError) == r.error.empty()) Fail("an error's message");
  if (r.positional.size() > args.size()) Fail("more arguments left over than given");
  const size_t tail = args.size() - r.positional.size();
  for (size_t k = 0; k < r.positional.size(); ++k) {
    if (r.positional[k] != args[tail + k]) Fail("the arguments left over are not a tail");
  }
  if (r.outcome == Outcome::kOk) p.CheckOptions();
  (void)p.flags.Usage();

  Program again(data[0]);
  const FlagSet::ParseResult r2 = again.flags.Parse(args);
  if (r2.outcome != r.outcome || r2.error != r.error || r2.positional != r.positional) {
    Fail("the same arguments parse differently");
  }

  for (const std::string& a : args) {
    std::chrono::milliseconds d{};
    if (!etcdw::common::ParseGoDuration(a, &d)) continue;
    std::chrono::milliseconds back{};
    const std::string text = etcdw::common::FormatGoDuration(d);
    if (!etcdw::common::ParseGoDuration(text, &back) || back != d) {
      std::fprintf(stderr, "%s -> %s\n", a.c_str(), text.c_str());
      Fail("a duration formatted does not parse back to itself");
    }
  }
  return 0;
}

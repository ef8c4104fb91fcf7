#include "etcdw/wrapper/bootstrap.h"

#include <algorithm>

#include "etcdw/common/flags.h"
#include "etcdw/common/logging.h"

namespace etcdw::wrapper {

namespace log = etcdw::log;
using std::chrono::milliseconds;

namespace {

Status Canceled() { return Status(Code::kCanceled, "stop requested during bootstrap"); }

}  // namespace

Status RunInitialization(SidecarClient& sidecar, const BootstrapOptions& options,
                         const common::StopRequest& stop) {
  const common::Clock& clock = *options.clock;
  const auto start = clock.Now();
  milliseconds backoff = options.poll_interval;
  InitState last_state = InitState::kInProgress;
  bool have_last_state = false;  // false after an error: log the next status again
  int failures = 0;
  while (true) {
    if (stop.requested()) return Canceled();
    auto state = sidecar.InitializationStatus(stop.cancelled());
    if (stop.requested()) return Canceled();
    milliseconds wait = options.poll_interval;
    if (!state.ok()) {
      // The sidecar is down or not answering: log (less often as it goes on) and back off.
      ++failures;
      if (failures <= 3 || (failures & (failures - 1)) == 0) {
        log::Error("error while fetching initialization status",
                   {log::F("error", state.status().message()), log::F("attempt", failures),
                    log::F("retry-in", common::FormatGoDuration(backoff))});
      }
      wait = backoff;
      backoff = std::min(backoff * 2, options.max_backoff);
      have_last_state = false;
    } else {
      if (failures > 0) log::Info("sidecar reachable again", {log::F("failed-attempts", failures)});
      failures = 0;
      backoff = options.poll_interval;
      if (!have_last_state || last_state != *state) {
        log::Info("fetched initialization status", {log::F("status", InitStateName(*state))});
        if (*state == InitState::kFailed) {
          log::Warn("the sidecar reports that initialisation failed; it will be triggered again");
        }
      }
      last_state = *state;
      have_last_state = true;
      if (*state == InitState::kSuccessful) {
        log::Info("etcd initialization succeeded",
                  {log::F("took", common::FormatGoDuration(std::chrono::duration_cast<milliseconds>(
                                      clock.Now() - start)))});
        return Status::Ok();
      }
      if (*state == InitState::kNew) {
        ValidationMode mode = ChooseValidationMode(options.exit_code_file);
        log::Info("triggering etcd initialization", {log::F("mode", ValidationModeName(mode))});
        if (Status st = sidecar.StartInitialization(mode, stop.cancelled()); !st.ok()) {
          if (stop.requested()) return Canceled();
          log::Error("failed to trigger initialization", {log::F("error", st.message())});
        }
      }
    }
    if (options.timeout.count() > 0 && clock.Now() + wait - start > options.timeout) {
      std::string why = state.ok() ? std::string("last status ") + InitStateName(*state)
                                   : state.status().message();
      return Status(Code::kDeadlineExceeded,
                    "the sidecar did not report a successful initialisation within " +
                        common::FormatGoDuration(options.timeout) + " (" + why + ")");
    }
    if (stop.WaitUntil(clock, clock.Now() + wait)) return Canceled();
  }
}

Result<std::string> FetchConfig(SidecarClient& sidecar, const BootstrapOptions& options,
                                const common::StopRequest& stop) {
  Status last;
  for (int attempt = 0; attempt < options.config_attempts; ++attempt) {
    if (stop.requested()) return Canceled();
    auto config = sidecar.Config(stop.cancelled());
    if (config.ok()) return config;
    if (stop.requested()) return Canceled();
    last = config.status();
    log::Info("re-attempting operation",
              {log::F("operation", "GetEtcdConfig"), log::F("current-attempt", attempt),
               log::F("error", last.message())});
    if (attempt + 1 < options.config_attempts &&
        stop.WaitUntil(*options.clock, options.clock->Now() + options.config_retry_interval)) {
      return Canceled();
    }
  }
  return Status(last.code(), "fetching the etcd configuration failed after " +
                                 std::to_string(options.config_attempts) +
                                 " attempts: " + last.message());
}

}  // namespace etcdw::wrapper

#include "grpc_log.h"

#include <absl/synchronization/mutex.h>
#include <grpc/support/log.h>

#include <cstdlib>
#include <string>
#include <string_view>

#include "etcdw/common/logging.h"

namespace etcdw::cmd {
namespace {

void GrpcLog(gpr_log_func_args* args) {
  std::string_view file = args->file ? args->file : "";
  if (size_t slash = file.rfind('/'); slash != std::string_view::npos)
    file.remove_prefix(slash + 1);
  std::string where = std::string(file) + ":" + std::to_string(args->line);
  const char* msg = args->message ? args->message : "";
  switch (args->severity) {
    case GPR_LOG_SEVERITY_DEBUG:
      log::Debug("grpc", {log::F("grpc-caller", where), log::F("detail", msg)});
      break;
    case GPR_LOG_SEVERITY_INFO:
      log::Info("grpc", {log::F("grpc-caller", where), log::F("detail", msg)});
      break;
    default:
      // gRPC reports problems it also returns to us (a failed bind becomes a start-up error);
      // keep them visible, but as warnings.
      log::Warn("grpc", {log::F("grpc-caller", where), log::F("detail", msg)});
      break;
  }
}

}  // namespace

void RouteGrpcLogs() { gpr_set_log_function(GrpcLog); }

void PollClientConnectionsPromptly() {
  setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "100", /*overwrite=*/0);
}

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace etcdw::cmd

// The exit-code file: why the wrapper last stopped, which decides how thoroughly the sidecar
// validates the data directory before the next start (gardener's protocol).
//
// The file holds the Go name of the signal that stopped the process ("terminated" for SIGTERM,
// "interrupt" for SIGINT), written on the first signal and deleted once the store has started
// again. A missing file therefore means the last run did not end by a signal: it crashed, was
// killed with SIGKILL, or was stopped through /stop; the data may be damaged.
#pragma once

#include <string>

namespace etcdw::wrapper {

enum class ValidationMode { kSanity, kFull };
const char* ValidationModeName(ValidationMode m);  // "sanity" / "full"

// `sanity` when the file holds "terminated" or "interrupt" (surrounding whitespace ignored),
// `full` in every other case (missing, unreadable, empty, anything else). Also removes the
// legacy `validation_marker` file beside it (written by gardener's older etcd-custom-image).
ValidationMode ChooseValidationMode(const std::string& exit_code_file);

// Writes `signal_name` (mode 0600, truncating). Failures are logged, not fatal.
void CaptureExitSignal(const std::string& exit_code_file, const std::string& signal_name);

// Deletes the file once the store has started; a missing file is fine, other failures are
// logged.
void RemoveExitCodeFile(const std::string& exit_code_file);

}  // namespace etcdw::wrapper

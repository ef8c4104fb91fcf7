#include "etcdw/sidecar/validator.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "etcdw/common/logging.h"
#include "etcdw/data_dir/data_dir.h"

namespace etcdw::sidecar {
namespace {

// gardener's safe guard: the volume belongs to the namespace that first used it.
Validation CheckSafeGuard(const std::string& data_dir) {
  const char* ns = std::getenv("POD_NAMESPACE");
  if (ns == nullptr || *ns == '\0') {
    log::Warn("POD_NAMESPACE is not set: skipping the wrong-volume check", {});
    return {DataDirStatus::kValid, ""};
  }
  std::filesystem::path parent = std::filesystem::path(data_dir).parent_path();
  if (parent.empty()) parent = ".";
  std::string guard = (parent / "safe_guard").string();
  struct stat st;
  if (stat(guard.c_str(), &st) != 0) {
    std::ofstream out(guard, std::ios::trunc);
    out << ns;
    out.close();
    if (!out) {
      return {DataDirStatus::kUnknown, "cannot write the safe guard file \"" + guard + "\""};
    }
  }
  chmod(guard.c_str(), 0600);
  std::ifstream in(guard);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in && !in.eof()) {
    return {DataDirStatus::kUnknown, "cannot read the safe guard file \"" + guard + "\""};
  }
  if (ss.str() != ns) {
    return {DataDirStatus::kWrongVolumeMounted, "the volume belongs to namespace \"" + ss.str() +
                                                    "\", this pod runs in \"" + ns + "\""};
  }
  return {DataDirStatus::kValid, ""};
}

DataDirStatus FromCheck(data_dir::DataDirState s) {
  switch (s) {
    case data_dir::DataDirState::kValid:
    case data_dir::DataDirState::kEtcdFormat:  // etcd's own: valid, the member takes it over
      return DataDirStatus::kValid;
    case data_dir::DataDirState::kNotExist:
      return DataDirStatus::kNotExist;
    case data_dir::DataDirState::kInvalidStruct:
      return DataDirStatus::kInvalidStructure;
    case data_dir::DataDirState::kCorrupt:
      return DataDirStatus::kCorrupt;
    case data_dir::DataDirState::kLocked:
      return DataDirStatus::kFailToOpen;
    case data_dir::DataDirState::kUnknown:
      break;
  }
  return DataDirStatus::kUnknown;
}

}  // namespace

const char* DataDirStatusName(DataDirStatus s) {
  switch (s) {
    case DataDirStatus::kValid:
      return "DataDirectoryValid";
    case DataDirStatus::kWrongVolumeMounted:
      return "WrongVolumeMounted";
    case DataDirStatus::kNotExist:
      return "DataDirectoryNotExist";
    case DataDirStatus::kInvalidStructure:
      return "DataDirectoryInvStruct";
    case DataDirStatus::kCorrupt:
      return "DataDirectoryCorrupt";
    case DataDirStatus::kUnknown:
      return "DataDirectoryStatusUnknown";
    case DataDirStatus::kInvalidInMultiNode:
      return "DataDirStatusInvalidInMultiNode";
    case DataDirStatus::kRevisionConsistencyError:
      return "RevisionConsistencyError";
    case DataDirStatus::kFailToOpen:
      return "FailToOpenBoltDBError";
  }
  return "unknown";
}

Validation ValidateDataDir(const std::string& data_dir, ValidationMode mode, SnapStore* store,
                           size_t cluster_size) {
  Validation guard = CheckSafeGuard(data_dir);
  if (guard.status != DataDirStatus::kValid) return guard;

  data_dir::DataDirCheck check = data_dir::CheckDataDir(data_dir, mode == ValidationMode::kFull);
  Validation v{FromCheck(check.state), check.detail};
  if (v.status == DataDirStatus::kValid && store != nullptr && cluster_size <= 1) {
    // The member must not be behind the backup: that would serve older data than was
    // acknowledged and backed up. Committed entries it has not applied yet count, since it
    // applies them before serving.
    auto list = store->List();
    if (!list.ok()) {
      return {DataDirStatus::kUnknown, "listing the snapshot store: " + list.status().message()};
    }
    int64_t backup_rev = FindLatestSet(*list).LastRevision();
    int64_t reachable = check.revision + static_cast<int64_t>(check.unapplied_entries);
    if (backup_rev > 0 && reachable < backup_rev) {
      v = {DataDirStatus::kRevisionConsistencyError,
           "the data directory is at revision " + std::to_string(check.revision) + " (+" +
               std::to_string(check.unapplied_entries) +
               " unapplied entries) but the latest backup is at revision " +
               std::to_string(backup_rev) + ": possible data loss"};
    }
  }
  if (v.status != DataDirStatus::kValid && v.status != DataDirStatus::kFailToOpen &&
      v.status != DataDirStatus::kWrongVolumeMounted && cluster_size > 1 && store != nullptr) {
    auto list = store->List();
    if (list.ok() && !list->empty()) {
      v = {DataDirStatus::kInvalidInMultiNode, v.detail};
    }
  }
  log::Info("data directory validated",
            {log::F("data-dir", data_dir),
             log::F("mode", mode == ValidationMode::kFull ? "full" : "sanity"),
             log::F("status", DataDirStatusName(v.status)), log::F("detail", v.detail)});
  return v;
}

}  // namespace etcdw::sidecar

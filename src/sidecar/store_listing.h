// How the object stores (S3, ABS) turn a listing into snapshots (private to src/sidecar), as
// gardener's stores do: list under the parent of "<prefix>/v2", so that v1 backups are found
// too, keep the keys that hold "v1" or "v2" after that parent, and parse them with
// ParseSnapshotKey; a key that does not parse is skipped with a warning.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "etcdw/sidecar/snapshot.h"

namespace etcdw::sidecar {

// The listing prefix of a store whose --store-prefix is `prefix`: the parent of
// V2Prefix(prefix), "" for an empty prefix ("a/b" -> "a/b", "" -> "").
std::string ListingParent(const std::string& prefix);

// Appends the snapshot named by the listed object `key` to `out`, if it is one (see above).
void AddListedKey(std::string_view key, std::string_view parent, std::vector<SnapshotInfo>* out);

}  // namespace etcdw::sidecar

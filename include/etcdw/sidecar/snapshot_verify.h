// Integrity checks of a snapshot's local payload before it is uploaded (a payload that fails is
// never uploaded). Both kinds end in a 32-byte SHA-256 trailer of everything before it:
//   full:  etcd's Maintenance.Snapshot stream; gardener's rule: size % 512 == 32.
//   delta: the sidecar's JSON event list (delta.h); more than the trailer.
// Thread-safe: each call reads the file through a descriptor of its own.
#pragma once

#include <string>

#include "etcdw/common/status.h"

namespace etcdw::sidecar {

// OK when `path` is a well-formed full snapshot. DataLoss naming the file for a wrong size or a
// trailer that does not match; NotFound when the file does not exist; Internal for other I/O
// errors.
Status VerifyFullSnapshotFile(const std::string& path);

// OK when `path` is longer than the trailer and the trailer matches. Errors as above. The JSON
// itself is not parsed (the sidecar wrote it).
Status VerifyDeltaSnapshotFile(const std::string& path);

}  // namespace etcdw::sidecar

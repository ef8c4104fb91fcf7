// The "ABS" snapshot store: Azure Blob Storage (or the Azurite emulator), spoken directly over
// HTTP(S) with Shared Key authorization (our own implementation, OpenSSL for HMAC-SHA256).
//
// Credentials as gardener's: a JSON file named by AZURE_APPLICATION_CREDENTIALS_JSON, or a
// directory named by AZURE_APPLICATION_CREDENTIALS (keys storageAccount, storageKey, optional
// domain and the older emulatorEnabled; see src/sidecar/abs_config.h). The container is
// --store-container under the service https://<account>.<domain, default blob.core.windows.net>,
// or under --store-endpoint-override (gardener joins the container to it: for Azurite,
// http://127.0.0.1:10000/<account>), objects under "<prefix>/v2/<name>".
//
// Save: a file up to min_chunk_size is one Put Blob; a larger one is a block blob of blocks of
// max(min_chunk_size, size/50000) bytes (Azure's most blocks per blob), block IDs the base64 of
// the 10-digit 1-based part number (gardener's), up to max_parallel_chunk_uploads blocks in
// flight, each retried with backoff, then one Put Block List. Either way the blob appears whole
// or not at all: staged blocks are invisible until committed (Azure drops uncommitted ones after
// a week). Only transient failures are retried: transport errors, timeouts, HTTP 408, 429, 5xx.
// Listing is gardener's: List Blobs under the parent of "<prefix>/v2", following NextMarker,
// names holding "v1" or "v2" parsed with ParseSnapshotKey (blob index tags, versions and
// immutability policies are not consulted). Fetch streams Get Blob into the file; Delete is
// Delete Blob, a missing blob being OK.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "etcdw/sidecar/snap_store.h"

namespace etcdw::sidecar {

// What gardener's store hard-codes; tests shorten it.
struct AbsStoreTuning {
  // A failed request (a block, a whole upload, a listing page...) is tried again up to
  // max_retries times, after first_backoff, then twice as long each time: 1, 2, 4, 8, 16 s.
  int max_retries = 5;
  std::chrono::milliseconds first_backoff{1000};
  // Per request: the deadline of a small request; for an upload or a download, the longest
  // time without a byte moving. gardener's chunk upload timeout.
  std::chrono::milliseconds request_timeout{180000};
  int list_max_results = 0;  // maxresults of a List Blobs page; 0: the service's (5000)
};

// options.env_prefix is put before the credential variables' names ("SOURCE_" for the copy
// source). Errors (nothing is sent): credentials (missing variable, unreadable or invalid file,
// missing keys, a key that is not base64), no container, an invalid endpoint, min_chunk_size below
// 1, max_parallel_chunk_uploads below 1.
Result<std::unique_ptr<SnapStore>> NewAbsStore(const SnapStoreOptions& options,
                                               const AbsStoreTuning& tuning = {});

}  // namespace etcdw::sidecar

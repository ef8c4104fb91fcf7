// The "S3" snapshot store: AWS S3 or any S3-compatible server, spoken directly over HTTP(S) with
// AWS Signature Version 4 (our own implementation, OpenSSL for HMAC/SHA-256).
//
// Credentials as gardener's: a JSON file named by AWS_APPLICATION_CREDENTIALS_JSON, or a
// directory named by AWS_APPLICATION_CREDENTIALS holding one file per key. Keys: region
// (required), accessKeyID, secretAccessKey, optional endpoint, s3ForcePathStyle,
// insecureSkipVerify, trustedCaCert. --store-endpoint-override wins over the file's endpoint.
// Path-style (http://host/bucket/key) when s3ForcePathStyle is true, else virtual-hosted
// (http://bucket.host/key); path-style also when the endpoint is an IP address or the bucket
// name is not a DNS label sequence (as the AWS SDK's endpoint rules). The default endpoint is
// https://s3.<region>.amazonaws.com. Uploads larger than min_chunk_size use multipart upload
// (parts of max(min_chunk_size, size/9999), up to max_parallel_chunk_uploads at once, a failed
// part retried with backoff, the upload aborted on failure); smaller ones one PUT, retried
// alike. Only transient failures are retried: transport errors, timeouts, HTTP 408, 429, 5xx.
// Over https the payload is sent unsigned (UNSIGNED-PAYLOAD, TLS protects it); over http its
// SHA-256 is signed. Listing is gardener's: ListObjectsV2 under the parent of "<prefix>/v2",
// keys holding "v1" or "v2" parsed with ParseSnapshotKey (unversioned buckets only: object
// versions, object lock and exclusion tags are not consulted).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "etcdw/sidecar/snap_store.h"

namespace etcdw::sidecar {

// What gardener's store hard-codes; tests shorten it.
struct S3StoreTuning {
  // A failed part (or single upload) is tried again up to max_retries times, after
  // first_backoff, then twice as long each time: 1, 2, 4, 8, 16 s.
  int max_retries = 5;
  std::chrono::milliseconds first_backoff{1000};
  // Per request: the deadline of a small request; for an upload or a download, the longest
  // time without a byte moving. gardener's chunk upload timeout.
  std::chrono::milliseconds request_timeout{180000};
  // CompleteMultipartUpload's deadline (gardener's).
  std::chrono::milliseconds complete_timeout{30000};
  int list_max_keys = 0;  // max-keys of a ListObjectsV2 page; 0: the server's default (1000)
};

// Errors: credentials (see LoadS3Credentials in src/sidecar/s3_config.h: missing variable,
// unreadable or invalid file, missing keys), an invalid endpoint, min_chunk_size below 5 MiB
// (S3's smallest part), max_parallel_chunk_uploads below 1, an unreadable trustedCaCert.
Result<std::unique_ptr<SnapStore>> NewS3Store(const SnapStoreOptions& options,
                                              const S3StoreTuning& tuning = {});

}  // namespace etcdw::sidecar

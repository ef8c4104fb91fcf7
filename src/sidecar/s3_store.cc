// The S3 snapshot store: each operation is one or more signed HTTP requests (sigv4.h) sent with
// the project's HTTP client, bodies streamed from and to files.
#include "etcdw/sidecar/s3_store.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "etcdw/common/hash.h"
#include "etcdw/common/http.h"
#include "etcdw/common/logging.h"
#include "etcdw/sidecar/sigv4.h"
#include "object_http.h"
#include "object_xml.h"
#include "s3_config.h"
#include "store_listing.h"

namespace etcdw::sidecar {

namespace {

using common::HttpResponse;
using objhttp::Retryable;
using objhttp::Stopper;
using objhttp::Succeeded;
using Headers = std::vector<std::pair<std::string, std::string>>;

constexpr int64_t kMinPartSize = int64_t{5} << 20;  // S3's smallest part but the last
constexpr int64_t kMaxParts = 9999;                 // gardener's s3NoOfChunk

std::string Md5(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), size);
}

// A bucket name usable as a host name label sequence (with TLS, without dots: a wildcard
// certificate covers one label only).
bool VirtualHostable(const std::string& bucket, bool tls) {
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  if (tls && bucket.find('.') != std::string::npos) return false;
  size_t label_start = 0;
  for (size_t i = 0; i <= bucket.size(); ++i) {
    if (i == bucket.size() || bucket[i] == '.') {
      if (i == label_start || bucket[label_start] == '-' || bucket[i - 1] == '-') return false;
      label_start = i + 1;
      continue;
    }
    char c = bucket[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

class S3Store final : public SnapStore {
 public:
  S3Store(const SnapStoreOptions& options, const S3StoreTuning& tuning, S3Credentials creds,
          StoreEndpoint endpoint, bool path_style, std::unique_ptr<common::HttpClient> client)
      : options_(options),
        tuning_(tuning),
        creds_(std::move(creds)),
        endpoint_(std::move(endpoint)),
        path_style_(path_style),
        client_(std::move(client)) {
    if (!creds_.sse_customer_key.empty()) {
      sse_headers_ = {
          {"x-amz-server-side-encryption-customer-algorithm", creds_.sse_customer_algorithm},
          {"x-amz-server-side-encryption-customer-key",
           common::Base64Encode(creds_.sse_customer_key)},
          {"x-amz-server-side-encryption-customer-key-md5",
           common::Base64Encode(Md5(creds_.sse_customer_key))},
      };
    }
  }

  Result<std::vector<SnapshotInfo>> List() override;
  Status Fetch(const SnapshotInfo& s, const std::string& dest) override;
  Status Save(const SnapshotInfo& s, const std::string& src) override;
  Status Delete(const SnapshotInfo& s) override;
  std::string Describe() const override {
    return "S3 store s3://" + options_.container + "/" + V2Prefix(options_.prefix) + " at " +
           endpoint_.ToString() + (path_style_ ? " (path-style)" : " (virtual-hosted)");
  }

 private:
  // One request. `key` is the object key ("" for the bucket), `query` already encoded.
  struct Call {
    std::string method;
    std::string key;
    std::string query;
    Headers headers;  // signed and sent, beside host, x-amz-date and x-amz-content-sha256
    std::string body;
    std::string body_file;  // when set: body_length bytes from body_offset
    int64_t body_offset = 0;
    int64_t body_length = 0;
    std::string response_file;
    bool streaming = false;  // request_timeout is a stall timeout, not a deadline
    std::chrono::milliseconds timeout{0};
    const std::atomic<bool>* cancel = nullptr;
  };

  Result<HttpResponse> Execute(const Call& call);
  // Execute until success, a permanent failure, or max_retries retries; returns the last result.
  Result<HttpResponse> ExecuteWithRetries(const Call& call, const std::string& what,
                                          Stopper* stopper);
  // The error of a failed call: the transport's, or S3's code and message with the HTTP status.
  Status Failure(const std::string& what, const Result<HttpResponse>& r) const;
  std::string Url(const std::string& key) const { return "s3://" + options_.container + "/" + key; }
  Status PutWhole(const std::string& key, const std::string& src, int64_t size);
  Status PutMultipart(const std::string& key, const std::string& src, int64_t size);
  Status Abort(const std::string& key, const std::string& upload_id);

  const SnapStoreOptions options_;
  const S3StoreTuning tuning_;
  const S3Credentials creds_;
  const StoreEndpoint endpoint_;
  const bool path_style_;
  std::unique_ptr<common::HttpClient> client_;
  Headers sse_headers_;
};

Result<HttpResponse> S3Store::Execute(const Call& call) {
  const std::string& bucket = options_.container;
  std::string host = endpoint_.HostHeader();
  std::string dial = endpoint_.HostPort();
  std::string path = endpoint_.base_path;
  if (path_style_) {
    path += "/" + sigv4::UriEncode(bucket, false);
    if (!call.key.empty()) path += "/" + sigv4::UriEncode(call.key, true);
  } else {
    host = bucket + "." + host;
    dial = bucket + "." + dial;
    path += "/" + sigv4::UriEncode(call.key, true);
  }

  std::string payload_hash;
  if (!call.body_file.empty()) {
    if (endpoint_.tls) {
      payload_hash = sigv4::kUnsignedPayload;
    } else {
      ETCDW_ASSIGN_OR_RETURN(
          payload_hash, sigv4::Sha256HexOfFile(call.body_file, call.body_offset, call.body_length));
    }
  } else {
    payload_hash = sigv4::Sha256Hex(call.body);
  }

  Headers headers = call.headers;
  const std::string amz_date = sigv4::AmzDate(std::chrono::system_clock::now());
  headers.emplace_back("host", host);
  headers.emplace_back("x-amz-content-sha256", payload_hash);
  headers.emplace_back("x-amz-date", amz_date);
  sigv4::Request to_sign{call.method, path, call.query, headers, payload_hash};
  sigv4::Signature sig = sigv4::Sign(to_sign, {creds_.access_key_id, creds_.secret_access_key},
                                     creds_.region, "s3", amz_date);
  headers.emplace_back("authorization", sig.authorization);

  common::HttpClientRequest req;
  req.method = call.method;
  req.host_port = dial;
  req.target = call.query.empty() ? path : path + "?" + call.query;
  req.headers = std::move(headers);
  req.body = call.body;
  req.body_file = call.body_file;
  req.body_offset = call.body_offset;
  req.body_length = call.body_length;
  req.response_file = call.response_file;
  if (call.streaming) {
    req.stall_timeout = tuning_.request_timeout;
  } else {
    req.timeout = call.timeout.count() > 0 ? call.timeout : tuning_.request_timeout;
  }
  req.cancel = call.cancel;
  return client_->Send(req);
}

Result<HttpResponse> S3Store::ExecuteWithRetries(const Call& call, const std::string& what,
                                                 Stopper* stopper) {
  return objhttp::SendWithRetries(
      [&] { return Execute(call); }, {tuning_.max_retries, tuning_.first_backoff}, "S3", what,
      [&](const Result<HttpResponse>& r) { return Failure("request", r).message(); }, stopper);
}

Status S3Store::Failure(const std::string& what, const Result<HttpResponse>& r) const {
  if (!r.ok()) return r.status().WithContext(what);
  const HttpResponse& resp = *r;
  const std::string code = objxml::FirstText(resp.body, "Code").value_or("");
  const std::string message = objxml::FirstText(resp.body, "Message").value_or("");
  std::string text = what + ": HTTP " + std::to_string(resp.status);
  if (!code.empty()) text += " " + code;
  if (!message.empty()) text += ": " + message;
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" ||
      code == "AuthorizationHeaderMalformed") {
    text += " (check accessKeyID, secretAccessKey and region in \"" + creds_.source + "\")";
  }
  Code c = Code::kFailedPrecondition;
  if (resp.status == 401 || resp.status == 403) c = Code::kPermissionDenied;
  if (resp.status == 404) c = Code::kNotFound;
  if (Retryable(r)) c = Code::kUnavailable;
  return Status(c, text);
}

Result<std::vector<SnapshotInfo>> S3Store::List() {
  const std::string parent = ListingParent(options_.prefix);
  std::vector<SnapshotInfo> out;
  std::string token;
  while (true) {
    Call call;
    call.method = "GET";
    call.query = "list-type=2&prefix=" + sigv4::UriEncode(parent, false);
    if (tuning_.list_max_keys > 0)
      call.query += "&max-keys=" + std::to_string(tuning_.list_max_keys);
    if (!token.empty()) call.query += "&continuation-token=" + sigv4::UriEncode(token, false);
    const std::string what = "list " + Url(parent);
    Result<HttpResponse> r = ExecuteWithRetries(call, what, nullptr);
    if (!Succeeded(r)) return Failure(what, r);
    for (std::string_view contents : objxml::Elements(r->body, "Contents")) {
      std::optional<std::string> key = objxml::FirstText(contents, "Key");
      if (key) AddListedKey(*key, parent, &out);
    }
    if (objxml::FirstText(r->body, "IsTruncated").value_or("false") != "true") break;
    token = objxml::FirstText(r->body, "NextContinuationToken").value_or("");
    if (token.empty()) {
      return Status(Code::kDataLoss, what + ": truncated listing without NextContinuationToken");
    }
  }
  SortSnapshots(out);
  return out;
}

Status S3Store::Fetch(const SnapshotInfo& s, const std::string& dest) {
  Call call;
  call.method = "GET";
  call.key = SnapshotKey(s);
  if (s.version_id) call.query = "versionId=" + sigv4::UriEncode(*s.version_id, false);
  call.headers = sse_headers_;
  call.response_file = dest;
  call.streaming = true;
  const std::string what = "download of " + Url(call.key) + " to \"" + dest + "\"";
  Result<HttpResponse> r = ExecuteWithRetries(call, what, nullptr);
  if (Succeeded(r)) return Status::Ok();
  ::unlink(dest.c_str());  // never leave a partial download behind
  return Failure(what, r);
}

Status S3Store::Save(const SnapshotInfo& s, const std::string& src) {
  if (s.snap_name.empty()) return InvalidArgument("S3 store: snapshot without a name");
  struct stat st {};
  if (::stat(src.c_str(), &st) != 0) {
    return Internal("S3 store: \"" + src + "\": " + std::strerror(errno));
  }
  const std::string key = V2Prefix(options_.prefix) + "/" + s.snap_name;
  const int64_t size = st.st_size;
  if (size <= options_.min_chunk_size) return PutWhole(key, src, size);
  return PutMultipart(key, src, size);
}

Status S3Store::PutWhole(const std::string& key, const std::string& src, int64_t size) {
  Call call;
  call.method = "PUT";
  call.key = key;
  call.headers = sse_headers_;
  call.body_file = src;
  call.body_length = size;
  call.streaming = true;
  const std::string what = "upload of \"" + src + "\" to " + Url(key);
  Result<HttpResponse> r = ExecuteWithRetries(call, what, nullptr);
  if (!Succeeded(r)) return Failure(what, r);
  return Status::Ok();
}

Status S3Store::PutMultipart(const std::string& key, const std::string& src, int64_t size) {
  const std::string url = Url(key);
  Call init;
  init.method = "POST";
  init.key = key;
  init.query = "uploads";
  init.headers = sse_headers_;
  Result<HttpResponse> started = ExecuteWithRetries(init, "start of upload to " + url, nullptr);
  if (!Succeeded(started)) return Failure("start of multipart upload to " + url, started);
  const std::string upload_id = objxml::FirstText(started->body, "UploadId").value_or("");
  if (upload_id.empty()) {
    return Status(Code::kDataLoss, "start of multipart upload to " + url + ": no UploadId in \"" +
                                       started->body.substr(0, 200) + "\"");
  }
  const std::string id_query = "uploadId=" + sigv4::UriEncode(upload_id, false);

  const int64_t part_size = std::max(options_.min_chunk_size, size / kMaxParts);
  const int64_t parts = (size + part_size - 1) / part_size;
  const int workers =
      static_cast<int>(std::min<int64_t>(options_.max_parallel_chunk_uploads, parts));
  log::Info("uploading snapshot in parts",
            {log::F("key", url), log::F("size", size), log::F("chunkSize", part_size),
             log::F("noOfChunks", parts), log::F("workers", workers)});

  // Each upload call writes only the ETag of its own part; all are read after the calls ended.
  std::vector<std::string> etags(static_cast<size_t>(parts));
  Status first_error =
      objhttp::UploadPartsInParallel(parts, workers, [&](int64_t i, Stopper& stopper) -> Status {
        Call part;
        part.method = "PUT";
        part.key = key;
        part.query = "partNumber=" + std::to_string(i + 1) + "&" + id_query;
        part.headers = sse_headers_;
        part.body_file = src;
        part.body_offset = i * part_size;
        part.body_length = std::min(part_size, size - i * part_size);
        part.streaming = true;
        part.cancel = stopper.flag();
        const std::string what = "upload of part " + std::to_string(i + 1) + "/" +
                                 std::to_string(parts) + " (offset " +
                                 std::to_string(part.body_offset) + ") to " + url;
        Result<HttpResponse> r = ExecuteWithRetries(part, what, &stopper);
        if (!Succeeded(r)) return Failure(what, r);
        std::string etag = common::HeaderValue(*r, "ETag");
        if (etag.empty()) return Status(Code::kDataLoss, what + ": no ETag in the response");
        etags[static_cast<size_t>(i)] = std::move(etag);
        return Status::Ok();
      });

  if (first_error.ok()) {
    std::string body =
        "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
    for (int64_t i = 0; i < parts; ++i) {
      body += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
              objxml::Escape(etags[static_cast<size_t>(i)]) + "</ETag></Part>";
    }
    body += "</CompleteMultipartUpload>";
    Call complete;
    complete.method = "POST";
    complete.key = key;
    complete.query = id_query;
    complete.headers = {{"content-type", "application/xml"}};
    complete.body = std::move(body);
    complete.timeout = tuning_.complete_timeout;
    Result<HttpResponse> done = Execute(complete);
    // S3 may answer 200 and still fail: the error is then the body.
    if (Succeeded(done) && objxml::Elements(done->body, "Error").empty()) return Status::Ok();
    first_error = Failure("completion of multipart upload to " + url, done);
    if (Succeeded(done)) first_error = Status(Code::kUnavailable, first_error.message());
  }
  if (Status aborted = Abort(key, upload_id); !aborted.ok()) {
    return Status(first_error.code(), first_error.message() + "; " + aborted.message());
  }
  return first_error;
}

Status S3Store::Abort(const std::string& key, const std::string& upload_id) {
  Call call;
  call.method = "DELETE";
  call.key = key;
  call.query = "uploadId=" + sigv4::UriEncode(upload_id, false);
  const std::string what = "abort of multipart upload " + upload_id + " to " + Url(key);
  log::Info("aborting multipart upload", {log::F("key", Url(key)), log::F("uploadID", upload_id)});
  Result<HttpResponse> r = ExecuteWithRetries(call, what, nullptr);
  if (Succeeded(r) || (r.ok() && r->status == 404)) return Status::Ok();
  return Failure(what, r);
}

Status S3Store::Delete(const SnapshotInfo& s) {
  Call call;
  call.method = "DELETE";
  call.key = SnapshotKey(s);
  if (s.version_id) call.query = "versionId=" + sigv4::UriEncode(*s.version_id, false);
  const std::string what = "delete of " + Url(call.key);
  Result<HttpResponse> r = ExecuteWithRetries(call, what, nullptr);
  if (Succeeded(r) || (r.ok() && r->status == 404)) return Status::Ok();
  return Failure(what, r);
}

}  // namespace

Result<std::unique_ptr<SnapStore>> NewS3Store(const SnapStoreOptions& options,
                                              const S3StoreTuning& tuning) {
  if (options.container.empty()) {
    return InvalidArgument("S3 snapshot store: no bucket: set --store-container or " +
                           options.env_prefix + "STORAGE_CONTAINER");
  }
  if (options.min_chunk_size < kMinPartSize) {
    return InvalidArgument("S3 snapshot store: --min-chunk-size " +
                           std::to_string(options.min_chunk_size) +
                           " is below 5 MiB, S3's smallest part");
  }
  if (options.max_parallel_chunk_uploads < 1) {
    return InvalidArgument("S3 snapshot store: --max-parallel-chunk-uploads must be at least 1");
  }
  ETCDW_ASSIGN_OR_RETURN(S3Credentials creds, LoadS3Credentials(options.env_prefix));
  std::string endpoint_text = options.endpoint_override;
  if (endpoint_text.empty() && !creds.endpoint.empty()) {
    log::Warn(
        "passing the endpoint through the credential file is deprecated; use "
        "--store-endpoint-override",
        {log::F("source", creds.source)});
    endpoint_text = creds.endpoint;
  }
  if (endpoint_text.empty()) endpoint_text = "https://s3." + creds.region + ".amazonaws.com";
  ETCDW_ASSIGN_OR_RETURN(StoreEndpoint endpoint, ParseStoreEndpoint(endpoint_text, "S3 endpoint"));
  const bool path_style = creds.force_path_style || endpoint.host_is_ip ||
                          !VirtualHostable(options.container, endpoint.tls);

  common::HttpClientOptions http;
  http.timeout = tuning.request_timeout;
  if (endpoint.tls) {
    http.tls = true;
    if (creds.insecure_skip_verify) {
      http.insecure_skip_verify = true;
    } else if (!creds.trusted_ca_cert.empty()) {
      http.ca_pem = creds.trusted_ca_cert;
      http.min_tls13 = true;
    } else {
      http.system_roots = true;
    }
  }
  auto client = common::HttpClient::Create(http);
  if (!client.ok()) {
    return client.status().WithContext("S3 snapshot store (credentials \"" + creds.source + "\")");
  }
  return std::unique_ptr<SnapStore>(new S3Store(options, tuning, std::move(creds),
                                                std::move(endpoint), path_style,
                                                std::move(client).value()));
}

}  // namespace etcdw::sidecar

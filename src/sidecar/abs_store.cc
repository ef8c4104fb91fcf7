// The ABS snapshot store: each operation is one or more HTTP requests signed with Shared Key
// (shared_key.h) sent with the project's HTTP client, bodies streamed from and to files.
#include "etcdw/sidecar/abs_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "abs_config.h"
#include "etcdw/common/http.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/url.h"
#include "object_http.h"
#include "object_xml.h"
#include "shared_key.h"
#include "store_listing.h"

namespace etcdw::sidecar {

namespace {

using common::HttpResponse;
using AbsHeaders = std::vector<std::pair<std::string, std::string>>;

constexpr int64_t kAbsMaxBlocks = 50000;  // Azure's most blocks in one block blob

class AbsStore final : public SnapStore {
 public:
  AbsStore(const SnapStoreOptions& options, const AbsStoreTuning& tuning, AbsCredentials creds,
           StoreEndpoint endpoint, std::unique_ptr<common::HttpClient> client)
      : options_(options),
        tuning_(tuning),
        creds_(std::move(creds)),
        endpoint_(std::move(endpoint)),
        client_(std::move(client)) {}

  Result<std::vector<SnapshotInfo>> List() override;
  Status Fetch(const SnapshotInfo& s, const std::string& dest) override;
  Status Save(const SnapshotInfo& s, const std::string& src) override;
  Status Delete(const SnapshotInfo& s) override;
  std::string Describe() const override {
    return "ABS store " + Url(V2Prefix(options_.prefix)) + " (account " + creds_.storage_account +
           ")";
  }

 private:
  // One request. `blob` is the blob name ("" for the container), `query` already encoded.
  struct Call {
    std::string method;
    std::string blob;
    std::string query;
    AbsHeaders headers;  // signed and sent, beside x-ms-date and x-ms-version
    std::string body;
    std::string body_file;  // when set: body_length bytes from body_offset
    int64_t body_offset = 0;
    int64_t body_length = 0;
    std::string response_file;
    bool streaming = false;  // request_timeout is a stall timeout, not a deadline
    const std::atomic<bool>* cancel = nullptr;
  };

  Result<HttpResponse> Execute(const Call& call);
  Result<HttpResponse> ExecuteWithRetries(const Call& call, const std::string& what,
                                          objhttp::Stopper* stopper);
  // The error of a failed call: the transport's, or Azure's error code and message with the
  // HTTP status.
  Status Failure(const std::string& what, const Result<HttpResponse>& r) const;
  // "<endpoint>/<container>/<blob>", for messages.
  std::string Url(const std::string& blob) const {
    return endpoint_.ToString() + "/" + options_.container + (blob.empty() ? "" : "/" + blob);
  }
  Status PutWhole(const std::string& blob, const std::string& src, int64_t size);
  Status PutBlocks(const std::string& blob, const std::string& src, int64_t size);

  const SnapStoreOptions options_;
  const AbsStoreTuning tuning_;
  const AbsCredentials creds_;
  const StoreEndpoint endpoint_;
  std::unique_ptr<common::HttpClient> client_;
};

Result<HttpResponse> AbsStore::Execute(const Call& call) {
  std::string path = endpoint_.base_path + "/" + common::PercentEncode(options_.container, false);
  if (!call.blob.empty()) path += "/" + common::PercentEncode(call.blob, true);

  AbsHeaders headers = call.headers;
  headers.emplace_back("x-ms-date", sharedkey::HttpDate(std::chrono::system_clock::now()));
  headers.emplace_back("x-ms-version", sharedkey::kApiVersion);
  sharedkey::Request to_sign{
      call.method, path, call.query, headers,
      call.body_file.empty() ? static_cast<int64_t>(call.body.size()) : call.body_length};
  sharedkey::Signature sig = sharedkey::Sign(to_sign, creds_.storage_account, creds_.key);
  headers.emplace_back("Authorization", sig.authorization);
  headers.emplace_back("Host", endpoint_.HostHeader());

  common::HttpClientRequest req;
  req.method = call.method;
  req.host_port = endpoint_.HostPort();
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
    req.timeout = tuning_.request_timeout;
  }
  req.cancel = call.cancel;
  return client_->Send(req);
}

Result<HttpResponse> AbsStore::ExecuteWithRetries(const Call& call, const std::string& what,
                                                  objhttp::Stopper* stopper) {
  return objhttp::SendWithRetries(
      [&] { return Execute(call); }, {tuning_.max_retries, tuning_.first_backoff}, "ABS", what,
      [&](const Result<HttpResponse>& r) { return Failure("request", r).message(); }, stopper);
}

Status AbsStore::Failure(const std::string& what, const Result<HttpResponse>& r) const {
  if (!r.ok()) return r.status().WithContext(what);
  const HttpResponse& resp = *r;
  // The code is in a header (also for HEAD) and in the body's <Error>; the message's first line
  // is the text (the next ones are the request ID and time).
  std::string code = common::HeaderValue(resp, "x-ms-error-code");
  if (code.empty()) code = objxml::FirstText(resp.body, "Code").value_or("");
  std::string message = objxml::FirstText(resp.body, "Message").value_or("");
  message = message.substr(0, message.find('\n'));
  std::string text = what + ": HTTP " + std::to_string(resp.status);
  if (!code.empty()) text += " " + code;
  if (!message.empty()) text += ": " + message;
  if (code == "AuthenticationFailed" || code == "AuthorizationFailure" ||
      code == "InvalidAuthenticationInfo") {
    text += " (check storageAccount and storageKey in \"" + creds_.source + "\")";
  }
  if (code == "ContainerNotFound") {
    text += " (the container \"" + options_.container + "\" does not exist)";
  }
  Code c = Code::kFailedPrecondition;
  if (resp.status == 401 || resp.status == 403) c = Code::kPermissionDenied;
  if (resp.status == 404) c = Code::kNotFound;
  if (objhttp::Retryable(r)) c = Code::kUnavailable;
  return Status(c, text);
}

Result<std::vector<SnapshotInfo>> AbsStore::List() {
  const std::string parent = ListingParent(options_.prefix);
  std::vector<SnapshotInfo> out;
  std::string marker;
  const std::string what = "list of " + Url(parent);
  while (true) {
    Call call;
    call.method = "GET";
    call.query = "restype=container&comp=list&prefix=" + common::PercentEncode(parent, false);
    if (tuning_.list_max_results > 0) {
      call.query += "&maxresults=" + std::to_string(tuning_.list_max_results);
    }
    if (!marker.empty()) call.query += "&marker=" + common::PercentEncode(marker, false);
    Result<HttpResponse> r = ExecuteWithRetries(call, what, nullptr);
    if (!objhttp::Succeeded(r)) return Failure(what, r);
    if (objxml::Elements(r->body, "EnumerationResults").empty()) {
      return Status(Code::kDataLoss, what + ": the answer is not a blob listing: \"" +
                                         r->body.substr(0, 200) + "\"");
    }
    AbsBlobListPage page = ParseAbsBlobList(r->body);
    for (const std::string& name : page.names) AddListedKey(name, parent, &out);
    if (page.next_marker.empty()) break;
    if (page.next_marker == marker) {
      return Status(Code::kDataLoss, what + ": the service repeated the marker \"" + marker + "\"");
    }
    marker = std::move(page.next_marker);
  }
  SortSnapshots(out);
  return out;
}

Status AbsStore::Fetch(const SnapshotInfo& s, const std::string& dest) {
  Call call;
  call.method = "GET";
  call.blob = SnapshotKey(s);
  call.response_file = dest;
  call.streaming = true;
  const std::string what = "download of " + Url(call.blob) + " to \"" + dest + "\"";
  Result<HttpResponse> r = ExecuteWithRetries(call, what, nullptr);
  if (objhttp::Succeeded(r)) return Status::Ok();
  ::unlink(dest.c_str());  // never leave a partial download behind
  return Failure(what, r);
}

Status AbsStore::Save(const SnapshotInfo& s, const std::string& src) {
  if (s.snap_name.empty()) return InvalidArgument("ABS store: snapshot without a name");
  struct stat st {};
  if (::stat(src.c_str(), &st) != 0) {
    return Internal("ABS store: \"" + src + "\": " + std::strerror(errno));
  }
  const std::string blob = V2Prefix(options_.prefix) + "/" + s.snap_name;
  const int64_t size = st.st_size;
  if (size <= options_.min_chunk_size) return PutWhole(blob, src, size);
  return PutBlocks(blob, src, size);
}

Status AbsStore::PutWhole(const std::string& blob, const std::string& src, int64_t size) {
  Call call;
  call.method = "PUT";
  call.blob = blob;
  call.headers = {{"x-ms-blob-type", "BlockBlob"}};
  call.body_file = src;
  call.body_length = size;
  call.streaming = true;
  const std::string what = "upload of \"" + src + "\" to " + Url(blob);
  Result<HttpResponse> r = ExecuteWithRetries(call, what, nullptr);
  if (!objhttp::Succeeded(r)) return Failure(what, r);
  return Status::Ok();
}

Status AbsStore::PutBlocks(const std::string& blob, const std::string& src, int64_t size) {
  const std::string url = Url(blob);
  const int64_t block_size =
      std::max(options_.min_chunk_size, (size + kAbsMaxBlocks - 1) / kAbsMaxBlocks);
  const int64_t blocks = (size + block_size - 1) / block_size;
  log::Info("uploading snapshot in blocks",
            {log::F("blob", url), log::F("size", size), log::F("chunkSize", block_size),
             log::F("noOfChunks", blocks),
             log::F("workers", std::min<int64_t>(options_.max_parallel_chunk_uploads, blocks))});
  Status staged = objhttp::UploadPartsInParallel(
      blocks, options_.max_parallel_chunk_uploads,
      [&](int64_t i, objhttp::Stopper& stopper) -> Status {
        Call block;
        block.method = "PUT";
        block.blob = blob;
        block.query = "comp=block&blockid=" + common::PercentEncode(AbsBlockId(i + 1), false);
        block.body_file = src;
        block.body_offset = i * block_size;
        block.body_length = std::min(block_size, size - i * block_size);
        block.streaming = true;
        block.cancel = stopper.flag();
        const std::string what = "upload of block " + std::to_string(i + 1) + "/" +
                                 std::to_string(blocks) + " (offset " +
                                 std::to_string(block.body_offset) + ") to " + url;
        Result<HttpResponse> r = ExecuteWithRetries(block, what, &stopper);
        if (!objhttp::Succeeded(r)) return Failure(what, r);
        return Status::Ok();
      });
  if (!staged.ok()) return staged;  // the staged blocks stay uncommitted: nothing appears

  std::string body = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
  for (int64_t i = 1; i <= blocks; ++i) {
    body += "<Latest>" + objxml::Escape(AbsBlockId(i)) + "</Latest>";
  }
  body += "</BlockList>";
  Call commit;
  commit.method = "PUT";
  commit.blob = blob;
  commit.query = "comp=blocklist";
  commit.headers = {{"Content-Type", "application/xml"}};
  commit.body = std::move(body);
  const std::string what = "commit of the " + std::to_string(blocks) + " blocks of " + url;
  Result<HttpResponse> r = ExecuteWithRetries(commit, what, nullptr);
  if (!objhttp::Succeeded(r)) return Failure(what, r);
  return Status::Ok();
}

Status AbsStore::Delete(const SnapshotInfo& s) {
  Call call;
  call.method = "DELETE";
  call.blob = SnapshotKey(s);
  const std::string what = "delete of " + Url(call.blob);
  Result<HttpResponse> r = ExecuteWithRetries(call, what, nullptr);
  if (objhttp::Succeeded(r) || (r.ok() && r->status == 404)) return Status::Ok();
  return Failure(what, r);
}

}  // namespace

Result<std::unique_ptr<SnapStore>> NewAbsStore(const SnapStoreOptions& options,
                                               const AbsStoreTuning& tuning) {
  if (options.container.empty()) {
    return InvalidArgument("ABS snapshot store: no container: set --store-container or " +
                           options.env_prefix + "STORAGE_CONTAINER");
  }
  if (options.min_chunk_size < 1) {
    return InvalidArgument("ABS snapshot store: --min-chunk-size must be at least 1");
  }
  if (options.max_parallel_chunk_uploads < 1) {
    return InvalidArgument("ABS snapshot store: --max-parallel-chunk-uploads must be at least 1");
  }
  ETCDW_ASSIGN_OR_RETURN(AbsCredentials creds, LoadAbsCredentials(options.env_prefix));
  ETCDW_ASSIGN_OR_RETURN(StoreEndpoint endpoint,
                         AbsServiceEndpoint(creds, options.endpoint_override));
  common::HttpClientOptions http;
  http.timeout = tuning.request_timeout;
  if (endpoint.tls) {
    http.tls = true;
    http.system_roots = true;
  }
  auto client = common::HttpClient::Create(http);
  if (!client.ok()) {
    return client.status().WithContext("ABS snapshot store (credentials \"" + creds.source + "\")");
  }
  return std::unique_ptr<SnapStore>(new AbsStore(options, tuning, std::move(creds),
                                                 std::move(endpoint), std::move(client).value()));
}

}  // namespace etcdw::sidecar

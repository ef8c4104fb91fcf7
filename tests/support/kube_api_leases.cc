// KubeApiServer's resources: discovery and coordination.k8s.io/v1 Leases. Every function here
// runs with mu_ held.
#include "kube_api_documents.h"
#include "kube_api_server.h"

namespace etcdw::testing {

using common::HttpResponse;
using kubeapi::Answer;
using nlohmann::json;

namespace {

constexpr char kLeasesPrefix[] = "/apis/coordination.k8s.io/v1/";

std::vector<std::string> Segments(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 1;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

HttpResponse NoSuchResource() {
  return Answer(404, kubeapi::FailureStatus(404, "NotFound",
                                            "the server could not find the requested resource"));
}

HttpResponse MethodNotAllowed() {
  return Answer(405, kubeapi::FailureStatus(
                         405, "MethodNotAllowed",
                         "the server does not allow this method on the requested resource"));
}

// The text of metadata.<key>, "" when absent or not text.
std::string MetaText(const json& object, const char* key) {
  const auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return "";
  const auto v = m->find(key);
  return v != m->end() && v->is_string() ? v->get<std::string>() : "";
}

// The parsed body, or the 400 the API answers for one it cannot decode.
std::optional<json> ParseBody(const std::string& body, HttpResponse* error) {
  json parsed = json::parse(body, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) {
    *error = Answer(400, kubeapi::BadRequest("the object provided is unrecognized (not a JSON "
                                             "object)"));
    return std::nullopt;
  }
  return parsed;
}

// A Lease body's kind, apiVersion and namespace must agree with the request; nullopt if they do.
std::optional<HttpResponse> CheckIdentity(const json& lease, const std::string& ns) {
  if (lease.contains("kind") && lease["kind"] != "Lease") {
    return Answer(400, kubeapi::BadRequest("the kind of the object " + lease["kind"].dump() +
                                           " is not Lease"));
  }
  if (lease.contains("apiVersion") && lease["apiVersion"] != "coordination.k8s.io/v1") {
    return Answer(
        400, kubeapi::BadRequest("the API version of the object " + lease["apiVersion"].dump() +
                                 " is not coordination.k8s.io/v1"));
  }
  const std::string object_ns = MetaText(lease, "namespace");
  if (!object_ns.empty() && object_ns != ns) {
    return Answer(400, kubeapi::BadRequest("the namespace of the provided object does not match "
                                           "the namespace sent on the request"));
  }
  return std::nullopt;
}

// With ?fieldValidation=Strict (kubectl's default), a field a Lease does not have is refused
// as kube-apiserver refuses it; other settings accept it (and it is stored as sent).
std::optional<HttpResponse> CheckStrict(const common::HttpRequest& r, const json& lease) {
  auto v = r.query.find("fieldValidation");
  if (v == r.query.end() || v->second != "Strict") return std::nullopt;
  const std::string field = kubeapi::UnknownLeaseField(lease);
  if (field.empty()) return std::nullopt;
  return Answer(400, kubeapi::BadRequest("strict decoding error: unknown field \"" + field + "\""));
}

// The content type without parameters ("application/json; charset=utf-8" -> "application/json").
std::string MediaType(const std::string& content_type) {
  return content_type.substr(0, content_type.find(';'));
}

}  // namespace

json KubeApiServer::Store(const std::string& ns, json lease) {
  lease["apiVersion"] = "coordination.k8s.io/v1";
  lease["kind"] = "Lease";
  json& meta = lease["metadata"];
  meta["namespace"] = ns;
  const std::string name = meta.value("name", "");
  auto& space = leases_[ns];
  if (auto old = space.find(name); old != space.end()) {
    meta["uid"] = old->second["metadata"]["uid"];
    meta["creationTimestamp"] = old->second["metadata"]["creationTimestamp"];
  }
  if (!meta.contains("uid")) {
    const std::string n = std::to_string(++uids_);  // the last group: 12 digits, zero-filled
    meta["uid"] =
        "00000000-0000-4000-8000-" + std::string(n.size() < 12 ? 12 - n.size() : 0, '0') + n;
  }
  if (!meta.contains("creationTimestamp")) meta["creationTimestamp"] = kubeapi::Timestamp();
  meta["resourceVersion"] = std::to_string(++resource_version_);
  space[name] = lease;
  return lease;
}

HttpResponse KubeApiServer::Route(const common::HttpRequest& r) {
  if (auto doc = kubeapi::Discovery(r.path, r.headers.count("host") ? r.headers.at("host") : "")) {
    return r.method == "GET" ? Answer(200, *doc) : MethodNotAllowed();
  }
  if (auto doc = kubeapi::OpenApiV3(r.path)) {
    return r.method == "GET" ? Answer(200, *doc) : MethodNotAllowed();
  }
  const std::string namespaces = "/api/v1/namespaces/";
  if (r.path.rfind(namespaces, 0) == 0 && r.path.size() > namespaces.size() &&
      r.path.find('/', namespaces.size()) == std::string::npos) {
    if (r.method != "GET") return MethodNotAllowed();
    return Answer(200, kubeapi::NamespaceObject(r.path.substr(namespaces.size())));
  }
  if (r.path.rfind(kLeasesPrefix, 0) != 0) return NoSuchResource();
  const auto s = Segments(r.path.substr(sizeof(kLeasesPrefix) - 2));
  // leases (every namespace), namespaces/<ns>/leases, namespaces/<ns>/leases/<name>
  if (s.size() == 1 && s[0] == "leases") return LeaseCollection(r, "");
  if (s.size() < 3 || s[0] != "namespaces" || s[1].empty() || s[2] != "leases") {
    return NoSuchResource();
  }
  if (s.size() == 3) return LeaseCollection(r, s[1]);
  if (s.size() == 4 && !s[3].empty()) return LeaseItem(r, s[1], s[3]);
  return NoSuchResource();
}

HttpResponse KubeApiServer::LeaseCollection(const common::HttpRequest& r, const std::string& ns) {
  if (r.method == "POST" && !ns.empty()) return Create(r, ns);
  if (r.method != "GET") return MethodNotAllowed();
  json items = json::array();
  for (const auto& [space, leases] : leases_) {
    if (!ns.empty() && space != ns) continue;
    for (const auto& [name, lease] : leases) {
      json item = lease;  // a list's items carry no kind or apiVersion
      item.erase("kind");
      item.erase("apiVersion");
      items.push_back(std::move(item));
    }
  }
  return Answer(200, {{"kind", "LeaseList"},
                      {"apiVersion", "coordination.k8s.io/v1"},
                      {"metadata", {{"resourceVersion", std::to_string(resource_version_)}}},
                      {"items", std::move(items)}});
}

HttpResponse KubeApiServer::LeaseItem(const common::HttpRequest& r, const std::string& ns,
                                      const std::string& name) {
  auto& space = leases_[ns];
  auto it = space.find(name);
  if (r.method == "PUT") return Replace(r, ns, name);
  if (r.method == "PATCH") return Patch(r, ns, name);
  if (r.method != "GET" && r.method != "DELETE") return MethodNotAllowed();
  if (it == space.end()) return Answer(404, kubeapi::LeaseNotFound(name));
  if (r.method == "GET") return Answer(200, it->second);
  const std::string uid = MetaText(it->second, "uid");
  space.erase(it);
  ++resource_version_;
  return Answer(200, kubeapi::DeletedStatus(name, uid));
}

HttpResponse KubeApiServer::Create(const common::HttpRequest& r, const std::string& ns) {
  HttpResponse error;
  auto lease = ParseBody(r.body, &error);
  if (!lease) return error;
  if (auto bad = CheckIdentity(*lease, ns)) return *bad;
  if (auto bad = CheckStrict(r, *lease)) return *bad;
  const std::string name = MetaText(*lease, "name");
  if (name.empty()) {
    return Answer(422, kubeapi::LeaseInvalid("", "metadata.name",
                                             "Required value: name or generateName is required"));
  }
  if (!MetaText(*lease, "resourceVersion").empty()) {
    return Answer(400, kubeapi::BadRequest("resourceVersion should not be set on objects to be "
                                           "created"));
  }
  if (leases_[ns].count(name)) return Answer(409, kubeapi::LeaseAlreadyExists(name));
  (*lease)["metadata"].erase("uid");
  (*lease)["metadata"].erase("creationTimestamp");
  return Answer(201, Store(ns, std::move(*lease)));
}

HttpResponse KubeApiServer::Replace(const common::HttpRequest& r, const std::string& ns,
                                    const std::string& name) {
  HttpResponse error;
  auto lease = ParseBody(r.body, &error);
  if (!lease) return error;
  if (auto bad = CheckIdentity(*lease, ns)) return *bad;
  if (auto bad = CheckStrict(r, *lease)) return *bad;
  if (MetaText(*lease, "name") != name) {
    return Answer(400, kubeapi::BadRequest("the name of the object (" + MetaText(*lease, "name") +
                                           ") does not match the name on the URL (" + name + ")"));
  }
  auto& space = leases_[ns];
  auto it = space.find(name);
  if (it == space.end()) return Answer(404, kubeapi::LeaseNotFound(name));
  const std::string rv = MetaText(*lease, "resourceVersion");
  // Leases allow no unconditional update: the resourceVersion read must be sent back.
  if (rv.empty()) {
    return Answer(422, kubeapi::LeaseInvalid(name, "metadata.resourceVersion",
                                             "Invalid value: 0x0: must be specified for an "
                                             "update"));
  }
  if (rv != MetaText(it->second, "resourceVersion")) {
    return Answer(409, kubeapi::LeaseConflict(name));
  }
  return Answer(200, Store(ns, std::move(*lease)));
}

HttpResponse KubeApiServer::Patch(const common::HttpRequest& r, const std::string& ns,
                                  const std::string& name) {
  auto& space = leases_[ns];
  auto it = space.find(name);
  if (it == space.end()) return Answer(404, kubeapi::LeaseNotFound(name));
  const std::string type =
      MediaType(r.headers.count("content-type") ? r.headers.at("content-type") : "");
  const json patch = json::parse(r.body, nullptr, false);
  if (patch.is_discarded()) {
    return Answer(400, kubeapi::BadRequest("the patch is not JSON"));
  }
  json patched = it->second;
  if (type == "application/merge-patch+json" || type == "application/strategic-merge-patch+json") {
    // A Lease has no list that a strategic merge would merge by key: both are RFC 7386.
    if (!patch.is_object()) return Answer(400, kubeapi::BadRequest("the patch is not an object"));
    patched.merge_patch(patch);
  } else if (type == "application/json-patch+json") {
    if (!patch.is_array()) return Answer(400, kubeapi::BadRequest("the patch is not a list"));
    try {
      patched = patched.patch(patch);
    } catch (const json::exception& e) {
      return Answer(422, kubeapi::FailureStatus(
                             422, "Invalid",
                             std::string("the server rejected our request due to an error in "
                                         "our request: ") +
                                 e.what(),
                             name));
    }
  } else {
    return Answer(415, kubeapi::FailureStatus(
                           415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json-patch+json, "
                           "application/merge-patch+json, "
                           "application/strategic-merge-patch+json"));
  }
  if (!patched.is_object() || MetaText(patched, "name") != name) {
    return Answer(422, kubeapi::LeaseInvalid(name, "metadata.name", "field is immutable"));
  }
  if (auto bad = CheckIdentity(patched, ns)) return *bad;
  if (auto bad = CheckStrict(r, patched)) return *bad;
  // A resourceVersion in the patch makes it conditional; one left alone matches by itself.
  const std::string rv = MetaText(patched, "resourceVersion");
  if (!rv.empty() && rv != MetaText(it->second, "resourceVersion")) {
    return Answer(409, kubeapi::LeaseConflict(name));
  }
  // A patch that changes nothing writes nothing, as etcd's store skips an identical write.
  if (patched == it->second) return Answer(200, it->second);
  return Answer(200, Store(ns, std::move(patched)));
}

}  // namespace etcdw::testing

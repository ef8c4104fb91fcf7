#include "kube_api_documents.h"

#include <time.h>

#include <chrono>
#include <set>

namespace etcdw::testing::kubeapi {

using nlohmann::json;

namespace {

constexpr char kGroup[] = "coordination.k8s.io";

std::string Quoted(const std::string& name) {
  return std::string("leases.coordination.k8s.io \"") + name + "\"";
}

json GroupVersion() { return {{"groupVersion", "coordination.k8s.io/v1"}, {"version", "v1"}}; }

json Group() {
  return {{"name", kGroup},
          {"versions", json::array({GroupVersion()})},
          {"preferredVersion", GroupVersion()}};
}

}  // namespace

common::HttpResponse Answer(int status, const json& body) {
  common::HttpResponse a;
  a.status = status;
  a.body = body.dump();
  a.headers["Content-Type"] = "application/json";
  return a;
}

json FailureStatus(int code, const std::string& reason, const std::string& message,
                   const std::string& name) {
  json s = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
            {"status", "Failure"}, {"message", message}, {"reason", reason}};
  if (!name.empty()) s["details"] = {{"name", name}, {"group", kGroup}, {"kind", "leases"}};
  s["code"] = code;
  return s;
}

json LeaseNotFound(const std::string& name) {
  return FailureStatus(404, "NotFound", Quoted(name) + " not found", name);
}

json LeaseAlreadyExists(const std::string& name) {
  return FailureStatus(409, "AlreadyExists", Quoted(name) + " already exists", name);
}

json LeaseConflict(const std::string& name) {
  return FailureStatus(409, "Conflict",
                       "Operation cannot be fulfilled on " + Quoted(name) +
                           ": the object has been modified; please apply your changes to the "
                           "latest version and try again",
                       name);
}

json LeaseInvalid(const std::string& name, const std::string& field, const std::string& why) {
  json s = FailureStatus(
      422, "Invalid",
      "Lease.coordination.k8s.io \"" + name + "\" is invalid: " + field + ": " + why, name);
  if (s.contains("details")) s["details"]["kind"] = "Lease";
  return s;
}

json BadRequest(const std::string& message) { return FailureStatus(400, "BadRequest", message); }

json Unauthorized() { return FailureStatus(401, "Unauthorized", "Unauthorized"); }

json InjectedFault(int code, const std::string& name) {
  switch (code) {
    case 403:
      return FailureStatus(403, "Forbidden",
                           Quoted(name) +
                               " is forbidden: User \"system:anonymous\" cannot "
                               "access resource \"leases\" in API group "
                               "\"coordination.k8s.io\"",
                           name);
    case 404:
      return LeaseNotFound(name);
    case 409:
      return LeaseConflict(name);
    case 429:
      return FailureStatus(429, "TooManyRequests", "Too many requests, please try again later.");
    case 500:
      return FailureStatus(500, "InternalError", "Internal error occurred: injected fault");
    case 503:
      return FailureStatus(503, "ServiceUnavailable",
                           "the server is currently unable to handle the request");
    default:
      return FailureStatus(code, "Unknown", "injected HTTP " + std::to_string(code));
  }
}

json DeletedStatus(const std::string& name, const std::string& uid) {
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", json::object()},
          {"status", "Success"},
          {"details", {{"name", name}, {"group", kGroup}, {"kind", "leases"}, {"uid", uid}}}};
}

std::optional<json> Discovery(const std::string& path, const std::string& address) {
  if (path == "/version") {
    return json{{"major", "1"},
                {"minor", "32"},
                {"gitVersion", "v1.32.0"},
                {"gitCommit", "0000000000000000000000000000000000000000"},
                {"gitTreeState", "clean"},
                {"buildDate", "2024-12-11T00:00:00Z"},
                {"goVersion", "go1.23.3"},
                {"compiler", "gc"},
                {"platform", "linux/amd64"}};
  }
  if (path == "/api") {
    return json{{"kind", "APIVersions"},
                {"versions", {"v1"}},
                {"serverAddressByClientCIDRs",
                 json::array({{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", address}}})}};
  }
  if (path == "/api/v1") {
    // kubectl treats an empty core group as a failed discovery, and asks for a namespace when
    // a namespaced object is not found.
    json namespaces = {{"name", "namespaces"},
                       {"singularName", "namespace"},
                       {"namespaced", false},
                       {"kind", "Namespace"},
                       {"verbs", {"get"}}};
    return json{{"kind", "APIResourceList"},
                {"groupVersion", "v1"},
                {"resources", json::array({namespaces})}};
  }
  if (path == "/apis") {
    return json{{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", json::array({Group()})}};
  }
  if (path == "/apis/coordination.k8s.io") {
    json g = Group();
    g["kind"] = "APIGroup";
    g["apiVersion"] = "v1";
    return g;
  }
  if (path == "/apis/coordination.k8s.io/v1") {
    json leases = {{"name", "leases"},
                   {"singularName", "lease"},
                   {"namespaced", true},
                   {"kind", "Lease"},
                   {"verbs", {"create", "delete", "get", "list", "patch", "update"}}};
    return json{{"kind", "APIResourceList"},
                {"apiVersion", "v1"},
                {"groupVersion", "coordination.k8s.io/v1"},
                {"resources", json::array({leases})}};
  }
  return std::nullopt;
}

std::optional<json> OpenApiV3(const std::string& path) {
  if (path == "/openapi/v3") {
    return json{{"paths",
                 {{"apis/coordination.k8s.io/v1",
                   {{"serverRelativeURL", "/openapi/v3/apis/coordination.k8s.io/v1?hash=1"}}}}}};
  }
  if (path != "/openapi/v3/apis/coordination.k8s.io/v1") return std::nullopt;
  const json gvk = {{"group", kGroup}, {"version", "v1"}, {"kind", "Lease"}};
  const json field_validation = {
      {"name", "fieldValidation"}, {"in", "query"}, {"schema", {{"type", "string"}}}};
  const json write = {{"x-kubernetes-group-version-kind", gvk},
                      {"parameters", json::array({field_validation})},
                      {"responses", {{"200", {{"description", "OK"}}}}}};
  return json{{"openapi", "3.0.0"},
              {"info", {{"title", "Kubernetes"}, {"version", "v1.32.0"}}},
              {"paths",
               {{"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases", {{"post", write}}},
                {"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}",
                 {{"put", write}, {"patch", write}}}}}};
}

std::string UnknownLeaseField(const json& object) {
  static const std::set<std::string> kTop = {"apiVersion", "kind", "metadata", "spec"};
  static const std::set<std::string> kMetadata = {"name",
                                                  "generateName",
                                                  "namespace",
                                                  "uid",
                                                  "resourceVersion",
                                                  "generation",
                                                  "creationTimestamp",
                                                  "deletionTimestamp",
                                                  "deletionGracePeriodSeconds",
                                                  "labels",
                                                  "annotations",
                                                  "ownerReferences",
                                                  "finalizers",
                                                  "managedFields",
                                                  "selfLink"};
  static const std::set<std::string> kSpec = {
      "holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions",
      "strategy",       "preferredHolder"};
  const auto unknown = [](const json& map, const std::set<std::string>& known,
                          const std::string& prefix) -> std::string {
    if (!map.is_object()) return "";
    for (const auto& [key, value] : map.items()) {
      if (!known.count(key)) return prefix + key;
    }
    return "";
  };
  std::string field = unknown(object, kTop, "");
  if (field.empty() && object.contains("metadata")) {
    field = unknown(object["metadata"], kMetadata, "metadata.");
  }
  if (field.empty() && object.contains("spec")) field = unknown(object["spec"], kSpec, "spec.");
  return field;
}

json NamespaceObject(const std::string& name) {
  return {{"kind", "Namespace"},
          {"apiVersion", "v1"},
          {"metadata", {{"name", name}}},
          {"status", {{"phase", "Active"}}}};
}

std::string Timestamp() {
  const time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace etcdw::testing::kubeapi

// The documents of the test Kubernetes API server (kube_api_server.h) that do not depend on its
// state: Status objects with kube-apiserver's reasons and messages, and discovery.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "etcdw/common/http.h"

namespace etcdw::testing::kubeapi {

// An answer with a JSON body.
common::HttpResponse Answer(int status, const nlohmann::json& body);

// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",...}; `name`, when not
// empty, goes into details with the lease resource's group and kind.
nlohmann::json FailureStatus(int code, const std::string& reason, const std::string& message,
                             const std::string& name = "");
// The API's answers about the lease `name`.
nlohmann::json LeaseNotFound(const std::string& name);
nlohmann::json LeaseAlreadyExists(const std::string& name);
nlohmann::json LeaseConflict(const std::string& name);
nlohmann::json LeaseInvalid(const std::string& name, const std::string& field,
                            const std::string& why);
nlohmann::json BadRequest(const std::string& message);
nlohmann::json Unauthorized();
// An injected fault: the Status kube-apiserver answers with that HTTP status (a lease conflict
// for 409, "forbidden" for 403, ...); `name` is the lease the request was about, if any.
nlohmann::json InjectedFault(int code, const std::string& name);
// A successful delete.
nlohmann::json DeletedStatus(const std::string& name, const std::string& uid);

// The discovery document at `path` (/version, /api, /api/v1 (namespaces only), /apis,
// /apis/coordination.k8s.io, /apis/coordination.k8s.io/v1), or none. `address` is the server's
// "host:port".
std::optional<nlohmann::json> Discovery(const std::string& path, const std::string& address);

// The OpenAPI v3 documents kubectl reads to learn that the server validates fields itself
// (PATCH of a Lease takes the fieldValidation parameter): the root at /openapi/v3 and the
// coordination.k8s.io/v1 document. Only what kubectl looks at; none otherwise.
std::optional<nlohmann::json> OpenApiV3(const std::string& path);

// The first field of `object` (a Lease) that a Lease does not have, as "spec.foo"; "" if none.
// The check of fieldValidation=Strict.
std::string UnknownLeaseField(const nlohmann::json& object);

// A Namespace object named `name` (every namespace exists on the test server).
nlohmann::json NamespaceObject(const std::string& name);

// RFC 3339 in UTC, whole seconds: metadata.creationTimestamp.
std::string Timestamp();

}  // namespace etcdw::testing::kubeapi

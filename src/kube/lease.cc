// Leases: their JSON, their paths, and the read-change-write loop.
#include <string>
#include <utility>

#include "etcdw/kube/client.h"

namespace etcdw::kube {

namespace {

using nlohmann::json;

constexpr char kMergePatch[] = "application/merge-patch+json";

// A field that must be a string or null/absent when present: its value, or an error naming it.
Result<std::optional<std::string>> OptionalText(const json& parent, const char* key,
                                                const std::string& where) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return InvalidArgument(where + "." + key + " is not a string");
  return std::optional<std::string>(it->get<std::string>());
}

Status RequireNames(const std::string& ns, const std::string& name) {
  if (ns.empty() || name.empty()) {
    return InvalidArgument("a lease needs a namespace and a name (given \"" + ns + "\" and \"" +
                           name + "\")");
  }
  return Status::Ok();
}

// Writes the named fields of `after` that differ from `before` into after.object, so that a
// change made through the fields and one made to the object both reach the server.
void CarryChangedFields(const Lease& before, Lease& after) {
  json& o = after.object;
  const auto set_spec = [&o](const char* key, const std::optional<std::string>& v) {
    o["spec"][key] = v ? json(*v) : json(nullptr);
  };
  if (after.holder_identity != before.holder_identity) {
    set_spec("holderIdentity", after.holder_identity);
  }
  if (after.renew_time != before.renew_time) set_spec("renewTime", after.renew_time);
  if (after.annotations != before.annotations) {
    o["metadata"]["annotations"] = after.annotations;
  }
  if (after.resource_version != before.resource_version) {
    o["metadata"]["resourceVersion"] = after.resource_version;
  }
}

}  // namespace

std::string LeasePath(const std::string& ns, const std::string& name) {
  std::string path = "/apis/coordination.k8s.io/v1/namespaces/" + ns + "/leases";
  if (!name.empty()) path += "/" + name;
  return path;
}

Result<Lease> LeaseFromJson(const nlohmann::json& object) {
  if (!object.is_object()) return InvalidArgument("a Lease is not a JSON object");
  if (auto kind = object.find("kind"); kind != object.end() && *kind != "Lease") {
    return InvalidArgument("not a Lease: kind " + kind->dump());
  }
  auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) {
    return InvalidArgument("a Lease without metadata");
  }
  Lease lease;
  ETCDW_ASSIGN_OR_RETURN(auto name, OptionalText(*metadata, "name", "metadata"));
  if (!name || name->empty()) return InvalidArgument("a Lease without metadata.name");
  lease.name = *name;
  ETCDW_ASSIGN_OR_RETURN(auto ns, OptionalText(*metadata, "namespace", "metadata"));
  lease.namespace_name = ns.value_or("");
  ETCDW_ASSIGN_OR_RETURN(auto rv, OptionalText(*metadata, "resourceVersion", "metadata"));
  lease.resource_version = rv.value_or("");
  if (auto a = metadata->find("annotations"); a != metadata->end() && !a->is_null()) {
    if (!a->is_object()) return InvalidArgument("metadata.annotations is not an object");
    for (const auto& [key, value] : a->items()) {
      if (!value.is_string()) {
        return InvalidArgument("metadata.annotations[\"" + key + "\"] is not a string");
      }
      lease.annotations[key] = value.get<std::string>();
    }
  }
  if (auto spec = object.find("spec"); spec != object.end() && !spec->is_null()) {
    if (!spec->is_object()) return InvalidArgument("spec is not an object");
    ETCDW_ASSIGN_OR_RETURN(lease.holder_identity, OptionalText(*spec, "holderIdentity", "spec"));
    ETCDW_ASSIGN_OR_RETURN(lease.renew_time, OptionalText(*spec, "renewTime", "spec"));
  }
  lease.object = object;
  return lease;
}

Result<Lease> KubeClient::GetLease(const std::string& ns, const std::string& name) {
  ETCDW_RETURN_IF_ERROR(RequireNames(ns, name));
  ETCDW_ASSIGN_OR_RETURN(json answer, Call("GET", LeasePath(ns, name)));
  return LeaseFromJson(answer);
}

Result<Lease> KubeClient::UpdateLease(const Lease& lease) {
  ETCDW_RETURN_IF_ERROR(RequireNames(lease.namespace_name, lease.name));
  if (!lease.object.is_object()) return InvalidArgument("Lease.object is not a JSON object");
  ETCDW_ASSIGN_OR_RETURN(
      json answer, Call("PUT", LeasePath(lease.namespace_name, lease.name), lease.object.dump()));
  return LeaseFromJson(answer);
}

Result<Lease> KubeClient::MergePatchLease(const std::string& ns, const std::string& name,
                                          const nlohmann::json& patch) {
  ETCDW_RETURN_IF_ERROR(RequireNames(ns, name));
  if (!patch.is_object()) return InvalidArgument("a merge patch of a Lease must be an object");
  ETCDW_ASSIGN_OR_RETURN(json answer,
                         Call("PATCH", LeasePath(ns, name), patch.dump(), kMergePatch));
  return LeaseFromJson(answer);
}

Result<Lease> KubeClient::ModifyLease(const std::string& ns, const std::string& name,
                                      const std::function<bool(Lease&)>& change, int attempts) {
  if (attempts < 1) return InvalidArgument("ModifyLease needs at least one attempt");
  Status conflict;
  for (int i = 0; i < attempts; ++i) {
    ETCDW_ASSIGN_OR_RETURN(Lease read, GetLease(ns, name));
    Lease changed = read;
    if (!change(changed)) return read;
    CarryChangedFields(read, changed);
    // The object keeps the resourceVersion read: the PUT fails if anyone wrote in between.
    auto written = UpdateLease(changed);
    if (written.ok() || written.status().code() != Code::kAborted) return written;
    conflict = written.status();
  }
  return Status(Code::kAborted,
                conflict.message() + "; gave up after " + std::to_string(attempts) + " attempts");
}

}  // namespace etcdw::kube

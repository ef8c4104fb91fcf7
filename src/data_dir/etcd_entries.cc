#include "etcd_entries.h"

#include <nlohmann/json.hpp>
#include <string>

#include "etcdw/common/hash.h"
#include "etcdw/common/password_hash.h"
#include "etcdw/etcd_wal.pb.h"
#include "etcdw/internal.pb.h"

namespace etcdw::data_dir::internal {

namespace {

constexpr int64_t kEtcdEntryNormal = 0;
constexpr int64_t kEtcdEntryConfChange = 1;
constexpr std::string_view kMembersPrefix = "/0/members/";
constexpr std::string_view kAttributesSuffix = "/attributes";

Status Bad(uint64_t index, const std::string& what) {
  return DataLoss("etcd log entry " + std::to_string(index) + ": " + what);
}

// The member ID of a v2 PUT of "/0/members/<hex id>/attributes", or 0.
uint64_t AttributesPathMember(std::string_view path) {
  if (path.size() <= kMembersPrefix.size() + kAttributesSuffix.size() ||
      path.substr(0, kMembersPrefix.size()) != kMembersPrefix ||
      path.substr(path.size() - kAttributesSuffix.size()) != kAttributesSuffix) {
    return 0;
  }
  std::string_view hex = path.substr(
      kMembersPrefix.size(), path.size() - kMembersPrefix.size() - kAttributesSuffix.size());
  if (hex.empty() || hex.size() > 16) return 0;
  uint64_t id = 0;
  for (char c : hex) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) return 0;
    id = id << 4 | static_cast<uint64_t>(d);
  }
  return id;
}

// A v2 request: the member publication becomes ours; the rest is counted and dropped.
Status TranslateV2(uint64_t index, const etcdwal::V2Request& v2, internalpb::Request* req,
                   EtcdEntryStats& stats) {
  const uint64_t member = AttributesPathMember(v2.path());
  if (v2.method() != "PUT" || member == 0) {
    ++stats.skipped_v2;
    return Status::Ok();
  }
  auto j = nlohmann::json::parse(v2.val(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad(index, "member attributes are not JSON");
  internalpb::MemberAttributes* a = req->mutable_member_attributes();
  a->set_id(member);
  auto name = j.find("name");
  if (name != j.end() && name->is_string()) a->set_name(name->get<std::string>());
  auto urls = j.find("clientURLs");
  if (urls != j.end() && urls->is_array()) {
    for (const auto& u : *urls) {
      if (!u.is_string()) return Bad(index, "member attributes: a client URL is not a string");
      a->add_client_urls(u.get<std::string>());
    }
  }
  req->set_id(v2.id());
  ++stats.member_attributes;
  ++stats.requests;
  return Status::Ok();
}

// Whether `s` is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points
// past U+10FFFF). Our requests keep names in protobuf strings, which must be UTF-8; etcd's are
// any bytes.
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the allowed range of the second byte
    if (c < 0x80) {
      len = 1;
    } else if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      if (c == 0xe0) lo = 0xa0;
      if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      if (c == 0xf0) lo = 0x90;
      if (c == 0xf4) hi = 0x8f;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xbf)) return false;
    }
    i += len;
  }
  return true;
}

// `name` (a user or role name of etcd's entry `index`) for a string field of ours: etcd took
// any bytes, our requests cannot hold a name that is not UTF-8.
Result<std::string> NameOf(uint64_t index, const char* what, const std::string& name) {
  if (IsUtf8(name)) return name;
  return FailedPrecondition("etcd log entry " + std::to_string(index) + ": the " + what + " " +
                            common::ToHex(name) +
                            " is not UTF-8, which etcd-wrapper cannot store; remove it in etcd "
                            "before the takeover");
}

// The password hash a user gets from etcd's entry: etcd 3.5's hashedPassword as it is, or etcd
// 3.4's plain password hashed now at `bcrypt_cost`, as etcd hashed it when applying. Never
// logged, never in an error.
Result<std::string> PasswordHashOf(uint64_t index, const std::string& name,
                                   const std::string& password, const std::string& hashed,
                                   int bcrypt_cost) {
  if (!hashed.empty()) return hashed;
  auto h = common::HashPassword(password, bcrypt_cost);
  if (!h.ok()) {
    return FailedPrecondition("etcd log entry " + std::to_string(index) +
                              ": the password of user " + common::ToHex(name) +
                              " cannot be hashed: " + std::string(h.status().message()));
  }
  return h;
}

// The auth requests that change nothing stored: a token (simple tokens are not persisted, and
// a takeover starts without any) or a read.
bool IsAuthReadOrToken(const etcdwal::InternalRaftRequest& r) {
  return r.has_authenticate() || r.has_auth_user_get() || r.has_auth_user_list() ||
         r.has_auth_role_get() || r.has_auth_role_list();
}

// etcd's auth request that changes its auth store as ours; false in `*found` when `r` holds
// none.
Status TranslateAuth(uint64_t index, const etcdwal::InternalRaftRequest& r, int bcrypt_cost,
                     internalpb::Request* req, bool* found) {
  *found = true;
  if (r.has_auth_enable()) {
    req->mutable_auth_enable();
  } else if (r.has_auth_disable()) {
    req->mutable_auth_disable();
  } else if (r.has_auth_user_add()) {
    const etcdwal::AuthUserAddRequest& in = r.auth_user_add();
    etcdserverpb::AuthUserAddRequest* out = req->mutable_user_add();
    ETCDW_ASSIGN_OR_RETURN(*out->mutable_name(), NameOf(index, "user name", in.name()));
    *out->mutable_options() = in.options();
    if (!in.options().no_password()) {  // etcd stores no hash for a user without password
      ETCDW_ASSIGN_OR_RETURN(
          *out->mutable_hashedpassword(),
          PasswordHashOf(index, in.name(), in.password(), in.hashed_password(), bcrypt_cost));
    }
  } else if (r.has_auth_user_change_password()) {
    const etcdwal::AuthUserChangePasswordRequest& in = r.auth_user_change_password();
    etcdserverpb::AuthUserChangePasswordRequest* out = req->mutable_user_change_password();
    ETCDW_ASSIGN_OR_RETURN(*out->mutable_name(), NameOf(index, "user name", in.name()));
    ETCDW_ASSIGN_OR_RETURN(
        *out->mutable_hashedpassword(),
        PasswordHashOf(index, in.name(), in.password(), in.hashed_password(), bcrypt_cost));
  } else if (r.has_auth_user_delete()) {
    ETCDW_ASSIGN_OR_RETURN(*req->mutable_user_delete()->mutable_name(),
                           NameOf(index, "user name", r.auth_user_delete().name()));
  } else if (r.has_auth_user_grant_role()) {
    const etcdwal::AuthUserRoleRequest& in = r.auth_user_grant_role();
    etcdserverpb::AuthUserGrantRoleRequest* out = req->mutable_user_grant_role();
    ETCDW_ASSIGN_OR_RETURN(*out->mutable_user(), NameOf(index, "user name", in.user()));
    ETCDW_ASSIGN_OR_RETURN(*out->mutable_role(), NameOf(index, "role name", in.role()));
  } else if (r.has_auth_user_revoke_role()) {
    const etcdwal::AuthUserRoleRequest& in = r.auth_user_revoke_role();
    etcdserverpb::AuthUserRevokeRoleRequest* out = req->mutable_user_revoke_role();
    ETCDW_ASSIGN_OR_RETURN(*out->mutable_name(), NameOf(index, "user name", in.user()));
    ETCDW_ASSIGN_OR_RETURN(*out->mutable_role(), NameOf(index, "role name", in.role()));
  } else if (r.has_auth_role_add()) {
    ETCDW_ASSIGN_OR_RETURN(*req->mutable_role_add()->mutable_name(),
                           NameOf(index, "role name", r.auth_role_add().name()));
  } else if (r.has_auth_role_delete()) {
    ETCDW_ASSIGN_OR_RETURN(*req->mutable_role_delete()->mutable_role(),
                           NameOf(index, "role name", r.auth_role_delete().name()));
  } else if (r.has_auth_role_grant_permission()) {
    const etcdwal::AuthRoleGrantPermissionRequest& in = r.auth_role_grant_permission();
    etcdserverpb::AuthRoleGrantPermissionRequest* out = req->mutable_role_grant_permission();
    ETCDW_ASSIGN_OR_RETURN(*out->mutable_name(), NameOf(index, "role name", in.name()));
    *out->mutable_perm() = in.perm();
  } else if (r.has_auth_role_revoke_permission()) {
    const etcdwal::AuthRoleRevokePermissionRequest& in = r.auth_role_revoke_permission();
    etcdserverpb::AuthRoleRevokePermissionRequest* out = req->mutable_role_revoke_permission();
    ETCDW_ASSIGN_OR_RETURN(*out->mutable_role(), NameOf(index, "role name", in.role()));
    out->set_key(in.key());
    out->set_range_end(in.range_end());
  } else {
    *found = false;
  }
  return Status::Ok();
}

// etcd's RequestHeader as ours. etcd 3.4's applier judges every request as the header's user at
// its auth revision, and as no user (revision 0) when the header is absent (an entry of etcd
// before 3.0); ours judges a request as the user of its `auth`, so every request translated from
// an InternalRaftRequest carries one: an empty user is refused as etcd refuses it (UserEmpty)
// while auth is enabled.
Status TranslateHeader(uint64_t index, const etcdwal::InternalRaftRequest& r,
                       internalpb::Request* req) {
  internalpb::AuthHeader* auth = req->mutable_auth();
  if (!r.has_header()) return Status::Ok();
  ETCDW_ASSIGN_OR_RETURN(*auth->mutable_username(),
                         NameOf(index, "header's user name", r.header().username()));
  auth->set_revision(r.header().auth_revision());
  return Status::Ok();
}

// The data of a normal entry as our request; an empty `req` (no operation) for an entry that
// changes nothing we store.
Status TranslateNormal(const EtcdEntry& e, int bcrypt_cost, internalpb::Request* req,
                       EtcdEntryStats& stats) {
  etcdwal::InternalRaftRequest r;
  if (!r.ParseFromString(e.data)) {
    // Not an InternalRaftRequest: a bare v2 request, as etcd 3.4 proposes its publication.
    etcdwal::V2Request v2;
    if (!v2.ParseFromString(e.data)) {
      return Bad(e.index, "neither an InternalRaftRequest nor a v2 request");
    }
    return TranslateV2(e.index, v2, req, stats);
  }
  const uint64_t id = r.has_header() && r.header().id() != 0 ? r.header().id() : r.id();
  if (r.has_v2()) return TranslateV2(e.index, r.v2(), req, stats);
  bool auth = false;
  ETCDW_RETURN_IF_ERROR(TranslateAuth(e.index, r, bcrypt_cost, req, &auth));
  if (auth) {
    ++stats.auth_requests;
  } else if (r.has_put()) {
    *req->mutable_put() = r.put();
  } else if (r.has_delete_range()) {
    *req->mutable_delete_range() = r.delete_range();
  } else if (r.has_txn()) {
    *req->mutable_txn() = r.txn();
  } else if (r.has_compaction()) {
    *req->mutable_compaction() = r.compaction();
  } else if (r.has_lease_grant()) {
    *req->mutable_lease_grant() = r.lease_grant();
  } else if (r.has_lease_revoke()) {
    *req->mutable_lease_revoke() = r.lease_revoke();
  } else if (r.has_alarm()) {
    *req->mutable_alarm() = r.alarm();
  } else if (r.has_lease_checkpoint()) {
    *req->mutable_lease_checkpoint() = r.lease_checkpoint();
  } else if (r.has_cluster_member_attr_set()) {
    const auto& set = r.cluster_member_attr_set();
    internalpb::MemberAttributes* a = req->mutable_member_attributes();
    a->set_id(set.member_id());
    a->set_name(set.member_attributes().name());
    for (const std::string& u : set.member_attributes().client_urls()) a->add_client_urls(u);
    ++stats.member_attributes;
  } else if (r.has_range() || IsAuthReadOrToken(r)) {
    ++stats.empty;  // a read through the log, or a token, changes nothing stored
    return Status::Ok();
  } else if (r.has_cluster_version_set() || r.has_downgrade_info_set()) {
    ++stats.skipped_other;
    return Status::Ok();
  } else {
    return Bad(e.index, "an InternalRaftRequest with no request this version knows");
  }
  ETCDW_RETURN_IF_ERROR(TranslateHeader(e.index, r, req));
  req->set_id(id);
  ++stats.requests;
  return Status::Ok();
}

Status TranslateConfChange(const EtcdEntry& e, raftpb::ConfChange* cc) {
  etcdwal::ConfChange in;
  if (!in.ParseFromString(e.data)) return Bad(e.index, "not a raftpb.ConfChange");
  if (in.type() < 0 || in.type() > 3) {
    return Bad(e.index, "conf change type " + std::to_string(in.type()) + " is unknown");
  }
  // etcd's and our conf change types have the same numbers.
  cc->set_type(static_cast<raftpb::ConfChangeType>(in.type()));
  cc->set_node_id(in.node_id());
  cc->set_id(in.id());
  if (in.context().empty()) return Status::Ok();
  auto j = nlohmann::json::parse(in.context(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return Bad(e.index, "the conf change's member is not JSON");
  auto promote = j.find("isPromote");
  if (promote != j.end() && promote->is_boolean() && promote->get<bool>()) {
    return Status::Ok();  // ours promotes with an ADD_NODE without a member record
  }
  auto m = ParseEtcdMemberJson(in.context());
  if (!m.ok()) return m.status().WithContext("etcd log entry " + std::to_string(e.index));
  cc->set_context(m->Serialize());
  return Status::Ok();
}

}  // namespace

Result<cluster::Member> ParseEtcdMemberJson(std::string_view json) {
  auto j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return DataLoss("an etcd member record is not JSON");
  cluster::Member m;
  auto id = j.find("id");
  if (id == j.end() || !id->is_number_unsigned() || id->get<uint64_t>() == 0) {
    return DataLoss("an etcd member record has no ID");
  }
  m.id = id->get<uint64_t>();
  auto strings = [&](const char* field, std::vector<std::string>* out) -> Status {
    auto it = j.find(field);
    if (it == j.end() || it->is_null()) return Status::Ok();
    if (!it->is_array())
      return DataLoss(std::string("etcd member record: ") + field + " is not a list");
    for (const auto& u : *it) {
      if (!u.is_string())
        return DataLoss(std::string("etcd member record: ") + field + " holds a non-string");
      out->push_back(u.get<std::string>());
    }
    return Status::Ok();
  };
  ETCDW_RETURN_IF_ERROR(strings("peerURLs", &m.peer_urls));
  ETCDW_RETURN_IF_ERROR(strings("clientURLs", &m.client_urls));
  auto name = j.find("name");
  if (name != j.end() && name->is_string()) m.name = name->get<std::string>();
  auto learner = j.find("isLearner");
  if (learner != j.end() && learner->is_boolean()) m.is_learner = learner->get<bool>();
  return m;
}

Result<raftpb::Entry> TranslateEtcdEntry(const EtcdEntry& e, EtcdEntryStats& stats,
                                         int bcrypt_cost) {
  raftpb::Entry out;
  out.set_index(e.index);
  out.set_term(e.term);
  if (e.type == kEtcdEntryConfChange) {
    raftpb::ConfChange cc;
    ETCDW_RETURN_IF_ERROR(TranslateConfChange(e, &cc));
    out.set_type(raftpb::ENTRY_CONF_CHANGE);
    out.set_data(cc.SerializeAsString());
    ++stats.conf_changes;
    return out;
  }
  if (e.type != kEtcdEntryNormal) {
    return Bad(e.index, "entry type " + std::to_string(e.type) +
                            " (a v2 conf change, which etcd 3.4's server never proposes)");
  }
  out.set_type(raftpb::ENTRY_NORMAL);
  if (e.data.empty()) {
    ++stats.empty;
    return out;
  }
  internalpb::Request req;
  ETCDW_RETURN_IF_ERROR(TranslateNormal(e, bcrypt_cost, &req, stats));
  if (req.op_case() != internalpb::Request::OP_NOT_SET) out.set_data(req.SerializeAsString());
  return out;
}

}  // namespace etcdw::data_dir::internal

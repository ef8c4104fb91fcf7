// Feeds the checks of the lease, compaction, member and auth requests arbitrary input: the
// checks of the request alone made before it is proposed or where it is applied, as etcd 3.4
// makes them (mvcc's CheckLeaseGrant and CheckCompaction, the member's CheckPeerUrls), and the
// auth store's judgement of user and role management (AuthStore's Stage* calls, which depend on
// the users and roles there) over a program of requests. Beyond not crashing, it checks that:
// - a refusal is one of the check's etcd errors, code and message exactly as in etcd_errors.h;
// - LeaseGrant: ID 0 is LeaseNotFound, then a TTL above 9,000,000,000 s LeaseTTLTooLarge;
//   otherwise the lease gets the TTL asked for, or the minimum TTL when that is larger (a TTL of
//   0 or below too, as etcd 3.4's lessor raises it);
// - Compaction: a revision at or below the compaction revision (-1 before any) is Compacted,
//   one above the current revision FutureRev, any other is accepted;
// - MemberAdd and MemberUpdate: no peer URL, or one without "://", without the scheme http or
//   https, or with a path after its host, is MemberBadURLs; accepted URLs are as many as given,
//   sorted, and each is http(s)://host:port that parses again to itself;
// - auth: each request gets exactly the answer a model of etcd 3.4's auth store predicts
//   (UserEmpty, RoleEmpty, UserAlreadyExist, RoleAlreadyExist, UserNotFound, RoleNotFound,
//   RoleNotGranted, PermissionNotGranted, InvalidAuthMgmt for root while enabled,
//   RootUserNotExist and RootRoleNotExist on enabling), and afterwards the store lists the
//   model's users, roles, each user's roles and each role's permissions.
// Input: byte 0 % 4 chooses LeaseGrant (byte 1 % 8 the minimum TTL, the rest the message),
// Compaction (bytes 1-16 the compaction and current revisions, the rest the message), a member
// request (byte 1 odd: MemberUpdate, else MemberAdd; the rest the message), or an auth program
// (the rest, three bytes a request: see RunAuthProgram).
#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "etcd/authpb/auth.pb.h"
#include "etcd/etcdserverpb/rpc.pb.h"
#include "etcdw/common/etcd_errors.h"
#include "etcdw/common/logging.h"
#include "etcdw/common/status.h"
#include "etcdw/common/url.h"
#include "etcdw/member/auth_store.h"
#include "etcdw/member/request_checks.h"
#include "etcdw/mvcc/txn.h"
#include "etcdw/storage/engine.h"
#include "in_memory_engine.h"
#include "input_reader.h"

namespace {

namespace errors = etcdw::errors;
namespace pb = etcdserverpb;
using etcdw::Status;
using etcdw::fuzz::InputReader;

[[noreturn]] void Fail(const std::string& what, const Status& st = Status::Ok()) {
  std::fprintf(stderr, "admin_requests_fuzzer: %s (%d: %s)\n", what.c_str(),
               static_cast<int>(st.code()), st.message().c_str());
  std::abort();
}

bool Same(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}

void ExpectOneOf(const Status& st, std::initializer_list<Status> allowed) {
  if (st.ok()) return;
  for (const Status& e : allowed) {
    if (Same(st, e)) return;
  }
  Fail("a refusal that is none of the check's etcd errors", st);
}

void Expect(const Status& st, const Status& want, const std::string& why) {
  if (!Same(st, want)) Fail(why + ": expected " + want.message(), st);
}

int64_t Int64(InputReader& in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | in.Byte();
  return static_cast<int64_t>(v);
}

// --- LeaseGrant -----------------------------------------------------------------------------

constexpr int64_t kMaxLeaseTtl = 9'000'000'000;  // etcd's lease.MaxLeaseTTL

void LeaseGrant(InputReader& in, std::string_view message) {
  const int64_t min_ttl = in.Byte() % 8;
  pb::LeaseGrantRequest r;
  const std::string_view body = message.substr(std::min<size_t>(message.size(), 2));
  if (!r.ParseFromArray(body.data(), static_cast<int>(body.size()))) return;
  const etcdw::Result<int64_t> ttl = etcdw::mvcc::CheckLeaseGrant(r, min_ttl);
  ExpectOneOf(ttl.status(), {errors::LeaseNotFound(), errors::LeaseTTLTooLarge()});
  if (r.id() == 0) return Expect(ttl.status(), errors::LeaseNotFound(), "lease ID 0 granted");
  if (r.ttl() > kMaxLeaseTtl) {
    return Expect(ttl.status(), errors::LeaseTTLTooLarge(), "a TTL above the largest granted");
  }
  if (!ttl.ok()) Fail("a grant of a good ID and TTL refused", ttl.status());
  if (*ttl != (r.ttl() < min_ttl ? min_ttl : r.ttl())) {
    Fail("the TTL granted is neither the one asked for nor the minimum above it");
  }
}

// --- Compaction -----------------------------------------------------------------------------

void Compaction(InputReader& in, std::string_view message) {
  // A store's revisions: current >= 1 (a new store is at 1), -1 <= compacted <= current.
  const int64_t current = 1 + static_cast<int64_t>(static_cast<uint64_t>(Int64(in)) >> 2);
  const int64_t compacted = -1 + static_cast<int64_t>(static_cast<uint64_t>(Int64(in)) %
                                                      (static_cast<uint64_t>(current) + 2));
  pb::CompactionRequest r;
  const std::string_view rest = message.substr(std::min<size_t>(message.size(), 17));
  if (!r.ParseFromArray(rest.data(), static_cast<int>(rest.size()))) return;
  const Status st = etcdw::mvcc::CheckCompaction(r.revision(), compacted, current);
  ExpectOneOf(st, {errors::Compacted(), errors::FutureRev()});
  if (r.revision() <= compacted) return Expect(st, errors::Compacted(), "compacted again");
  if (r.revision() > current) return Expect(st, errors::FutureRev(), "compacted ahead");
  if (!st.ok()) Fail("a compaction between the compacted and current revisions refused", st);
}

// --- MemberAdd, MemberUpdate ----------------------------------------------------------------

// What a plain reading of etcd's rules refuses in one URL (blanks at either end trimmed): no
// "://", a scheme other than http or https (etcd also takes unix and unixs; this server does
// not), or a '/' after the authority (a path).
bool PlainlyBad(std::string_view u) {
  u = etcdw::common::Trim(u);
  const size_t sep = u.find("://");
  if (sep == std::string_view::npos) return true;
  std::string scheme(u.substr(0, sep));
  for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "http" && scheme != "https") return true;
  return u.find('/', sep + 3) != std::string_view::npos;
}

void Members(InputReader& in, std::string_view message) {
  const bool update = in.Byte() % 2 == 1;
  const std::string_view body = message.substr(std::min<size_t>(message.size(), 2));
  google::protobuf::RepeatedPtrField<std::string> urls;
  if (update) {
    pb::MemberUpdateRequest r;
    if (!r.ParseFromArray(body.data(), static_cast<int>(body.size()))) return;
    urls = r.peerurls();
  } else {
    pb::MemberAddRequest r;
    if (!r.ParseFromArray(body.data(), static_cast<int>(body.size()))) return;
    urls = r.peerurls();
  }
  const etcdw::Result<std::vector<std::string>> out = etcdw::member::CheckPeerUrls(urls);
  ExpectOneOf(out.status(), {errors::MemberBadURLs()});
  if (urls.empty()) return Expect(out.status(), errors::MemberBadURLs(), "no peer URL accepted");
  for (const std::string& u : urls) {
    if (PlainlyBad(u)) return Expect(out.status(), errors::MemberBadURLs(), "a bad URL accepted");
  }
  if (!out.ok()) return;
  if (out->size() != static_cast<size_t>(urls.size())) Fail("accepted URLs lost or gained");
  if (!std::is_sorted(out->begin(), out->end())) Fail("accepted URLs are not sorted");
  for (const std::string& u : *out) {
    if (u.rfind("http://", 0) != 0 && u.rfind("https://", 0) != 0) Fail("an URL of no scheme");
    const etcdw::Result<etcdw::common::Url> again = etcdw::common::ParseUrl(u);
    if (!again.ok() || again->ToString() != u) Fail("an accepted URL does not parse to itself");
  }
}

// --- auth -----------------------------------------------------------------------------------

// etcd 3.4's auth store (server/auth/store.go) as a model: users with their roles, roles with
// their permissions (key and range end), and whether authentication is enabled.
struct AuthModel {
  std::map<std::string, std::set<std::string>> users;
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> roles;  // by key
  bool enabled = false;
};

// Names from a small set, so that requests meet the users and roles earlier ones made.
const char* const kUserNames[] = {"", "root", "alice", "bob"};
const char* const kRoleNames[] = {"", "root", "reader", "writer"};
const char* const kKeys[] = {"", "a", "b", "\0"};

// Each request: op (byte % 10), a user or role (byte % 4), and a role or key choice (byte).
void RunAuthProgram(InputReader& in) {
  etcdw::storage::Engine& engine = etcdw::fuzz::InMemoryEngine();
  etcdw::member::AuthStore store;
  AuthModel m;
  while (!in.empty()) {
    const uint8_t op = in.Byte() % 10;
    const uint8_t a = in.Byte();
    const uint8_t b = in.Byte();
    const std::string user = kUserNames[a % 4];
    const std::string role = op == 4 || op == 5 ? kRoleNames[b % 4] : kRoleNames[a % 4];
    etcdw::storage::Batch batch(engine);
    Status st;
    Status want;
    switch (op) {
      case 0: {  // AuthEnable
        st = store.StageEnable(batch);
        auto root = m.users.find("root");
        if (m.enabled) {
          want = Status::Ok();
        } else if (root == m.users.end()) {
          want = errors::RootUserNotExist();
        } else if (root->second.count("root") == 0) {
          want = errors::RootRoleNotExist();
        }
        if (st.ok()) m.enabled = true;
        break;
      }
      case 1:  // AuthDisable
        store.StageDisable(batch);
        m.enabled = false;
        break;
      case 2: {  // UserAdd
        pb::AuthUserAddRequest r;
        r.set_name(user);
        r.mutable_options()->set_no_password(b % 2 == 1);
        if (b % 2 == 0) r.set_hashedpassword("$2a$04$not-a-real-hash-but-opaque-here");
        st = store.StageUserAdd(batch, r);
        if (user.empty()) {
          want = errors::UserEmpty();
        } else if (m.users.count(user)) {
          want = errors::UserAlreadyExist();
        } else {
          m.users[user];
        }
        break;
      }
      case 3:  // UserDelete
        st = store.StageUserDelete(batch, user);
        if (m.enabled && user == "root") {
          want = errors::InvalidAuthMgmt();
        } else if (m.users.erase(user) == 0) {
          want = errors::UserNotFound();
        }
        break;
      case 4:  // UserGrantRole (the root role need not exist)
        st = store.StageUserGrantRole(batch, user, role);
        if (!m.users.count(user)) {
          want = errors::UserNotFound();
        } else if (role != "root" && !m.roles.count(role)) {
          want = errors::RoleNotFound();
        } else {
          m.users[user].insert(role);  // granting twice is ignored
        }
        break;
      case 5:  // UserRevokeRole
        st = store.StageUserRevokeRole(batch, user, role);
        if (m.enabled && user == "root" && role == "root") {
          want = errors::InvalidAuthMgmt();
        } else if (!m.users.count(user)) {
          want = errors::UserNotFound();
        } else if (m.users[user].erase(role) == 0) {
          want = errors::RoleNotGranted();
        }
        break;
      case 6:  // RoleAdd
        st = store.StageRoleAdd(batch, role);
        if (role.empty()) {
          want = errors::RoleEmpty();
        } else if (m.roles.count(role)) {
          want = errors::RoleAlreadyExist();
        } else {
          m.roles[role];
        }
        break;
      case 7:  // RoleDelete: the role is taken from every user too
        st = store.StageRoleDelete(batch, role);
        if (m.enabled && role == "root") {
          want = errors::InvalidAuthMgmt();
        } else if (m.roles.erase(role) == 0) {
          want = errors::RoleNotFound();
        } else {
          for (auto& [name, granted] : m.users) granted.erase(role);
        }
        break;
      case 8: {
        // RoleGrantPermission. etcd 3.4 keeps a role's permissions sorted by key and looks only
        // at the first of the key (sort.Search): when it has the same range end its type is
        // replaced, otherwise the permission is added (so a key may come to hold one range
        // twice) and the list sorted again.
        authpb::Permission perm;
        perm.set_key(std::string(kKeys[b % 4], b % 4 == 3 ? 1 : std::strlen(kKeys[b % 4])));
        perm.set_range_end((b / 4) % 2 == 1 ? "c" : "");
        perm.set_permtype(static_cast<authpb::Permission_Type>((b / 8) % 3));
        st = store.StageRoleGrantPermission(batch, role, perm);
        auto r = m.roles.find(role);
        if (r == m.roles.end()) {
          want = errors::RoleNotFound();
        } else {
          auto& perms = r->second;
          auto first = std::find_if(perms.begin(), perms.end(),
                                    [&perm](const auto& p) { return p.first >= perm.key(); });
          if (first == perms.end() || first->first != perm.key() ||
              first->second != perm.range_end()) {
            perms.emplace_back(perm.key(), perm.range_end());
            std::stable_sort(perms.begin(), perms.end(),
                             [](const auto& x, const auto& y) { return x.first < y.first; });
          }
        }
        break;
      }
      default: {  // RoleRevokePermission
        const std::string key(kKeys[b % 4], b % 4 == 3 ? 1 : std::strlen(kKeys[b % 4]));
        const std::string range_end = (b / 4) % 2 == 1 ? "c" : "";
        st = store.StageRoleRevokePermission(batch, role, key, range_end);
        auto r = m.roles.find(role);
        if (r == m.roles.end()) {
          want = errors::RoleNotFound();
        } else {
          auto& perms = r->second;
          const auto gone = std::remove(perms.begin(), perms.end(), std::make_pair(key, range_end));
          if (gone == perms.end()) want = errors::PermissionNotGranted();
          perms.erase(gone, perms.end());
        }
        break;
      }
    }
    if (!Same(st, want)) {
      Fail("auth request " + std::to_string(op) + " (user \"" + user + "\", role \"" + role +
               "\") answered otherwise than etcd: expected \"" + want.message() + "\"",
           st);
    }
    // The store holds the model's state.
    if (store.Enabled() != m.enabled) Fail("enabled otherwise than etcd");
    std::vector<std::string> users;
    for (const auto& [name, granted] : m.users) users.push_back(name);
    if (store.UserNames() != users) Fail("other users than etcd's");
    std::vector<std::string> roles;
    for (const auto& [name, perms] : m.roles) roles.push_back(name);
    if (store.RoleNames() != roles) Fail("other roles than etcd's");
    for (const auto& [name, granted] : m.users) {
      etcdw::Result<std::vector<std::string>> got = store.UserRoles(name);
      if (!got.ok()) Fail("a user's roles are not read", got.status());
      std::vector<std::string> sorted = *got;
      std::sort(sorted.begin(), sorted.end());
      if (sorted != std::vector<std::string>(granted.begin(), granted.end())) {
        Fail("a user holds other roles than etcd's");
      }
    }
    for (const auto& [name, perms] : m.roles) {
      etcdw::Result<std::vector<authpb::Permission>> got = store.RolePermissions(name);
      if (!got.ok()) Fail("a role's permissions are not read", got.status());
      std::multiset<std::pair<std::string, std::string>> held;
      for (const authpb::Permission& p : *got) held.emplace(p.key(), p.range_end());
      if (held != std::multiset<std::pair<std::string, std::string>>(perms.begin(), perms.end())) {
        Fail("a role holds other permissions than etcd's");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    etcdw::log::SetLevel(etcdw::log::Level::kOff);
    // A string field that is not UTF-8 fails parsing, as the client port refuses it; protobuf
    // would also write each to stderr.
    google::protobuf::SetLogHandler(
        [](google::protobuf::LogLevel, const char*, int, const std::string&) {});
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  const std::string_view message(reinterpret_cast<const char*>(data), size);
  InputReader in(message);
  switch (in.Byte() % 4) {
    case 0:
      LeaseGrant(in, message);
      break;
    case 1:
      Compaction(in, message);
      break;
    case 2:
      Members(in, message);
      break;
    default:
      RunAuthProgram(in);
      break;
  }
  return 0;
}

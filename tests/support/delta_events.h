// Events as a delta snapshot carries them (and as OfflineStore::ApplyRevision takes them), for
// the tests of delta replay. Header-only, as files.h.
#pragma once

#include <cstdint>
#include <string>

#include "etcd/mvccpb/kv.pb.h"

namespace etcdw::testsupport {

// `key` put to `value` at revision `rev`, with `lease`; the create revision and version as given
// (0 leaves them unset, as replay does not read them).
inline mvccpb::Event PutEvent(const std::string& key, const std::string& value, int64_t rev,
                              int64_t lease = 0, int64_t create = 0, int64_t version = 0) {
  mvccpb::Event e;
  e.set_type(mvccpb::Event::PUT);
  e.mutable_kv()->set_key(key);
  e.mutable_kv()->set_value(value);
  e.mutable_kv()->set_mod_revision(rev);
  e.mutable_kv()->set_lease(lease);
  e.mutable_kv()->set_create_revision(create);
  e.mutable_kv()->set_version(version);
  return e;
}

// `key` deleted at revision `rev`.
inline mvccpb::Event DeleteEvent(const std::string& key, int64_t rev) {
  mvccpb::Event e;
  e.set_type(mvccpb::Event::DELETE);
  e.mutable_kv()->set_key(key);
  e.mutable_kv()->set_mod_revision(rev);
  return e;
}

}  // namespace etcdw::testsupport

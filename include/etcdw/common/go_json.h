// JSON text as Go's encoding/json writes it, for answers and tokens that must be byte-identical
// to etcd's.
#pragma once

#include <string>
#include <string_view>

namespace etcdw::common {

// Go's encoding/json string form: quotes, backslashes and control characters escaped, and <, >,
// & as \u003c, \u003e, \u0026 (its HTML-safe default). The bytes are copied otherwise.
std::string GoJsonQuote(std::string_view s);

}  // namespace etcdw::common

// Helpers shared by the HTTP server and client (private to src/common).
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <map>
#include <string>

#include "etcdw/common/status.h"

namespace etcdw::common {

// "/a/b?x=1&y=%20" -> path "/a/b", query {x: "1", y: " "} (the first value of a name wins).
void SplitTarget(const std::string& target, std::string* path,
                 std::map<std::string, std::string>* query);

// TLS 1.2 or newer, no compression or renegotiation quirks.
Status ConfigureTlsBase(boost::asio::ssl::context& c);
// Errors name the file: `cert-file "/x.pem": no such file`.
Status LoadCertificateAndKey(boost::asio::ssl::context& c, const std::string& cert_file,
                             const std::string& key_file);
// Loads a PEM CA bundle as the verification roots; a bundle without a certificate is an error.
Status LoadCaBundle(boost::asio::ssl::context& c, const std::string& ca_file);
// The same for a bundle given as PEM text; `what` names its origin in errors.
Status LoadCaPem(boost::asio::ssl::context& c, const std::string& pem, const std::string& what);

}  // namespace etcdw::common

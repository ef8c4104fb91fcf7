#include "test_certs.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "files.h"

namespace etcdw::testing {

namespace {
constexpr char kKeyArgs[] = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
}

TestCerts::TestCerts() : scratch_("certs"), dir_(scratch_.path()) {}

TestCerts::~TestCerts() = default;

bool TestCerts::Run(const std::string& script) {
  if (dir_.empty()) return false;
  std::ofstream(dir_ + "/gen.sh") << "set -e; cd '" << dir_ << "'\n" << script;
  std::string cmd = "bash '" + dir_ + "/gen.sh' >'" + dir_ + "/gen.log' 2>&1";
  return std::system(cmd.c_str()) == 0;
}

std::string TestCerts::log() const { return testsupport::ReadFile(dir_ + "/gen.log"); }

bool TestCerts::AddCa(const std::string& name) {
  return Run(std::string("openssl req -x509 ") + kKeyArgs + " -keyout " + name + ".key -out " +
             name + ".crt -subj /CN=" + name + " -days 2\n");
}

bool TestCerts::Issue(const std::string& name, const std::string& ca,
                      const std::vector<std::string>& dns_names) {
  std::string sans = "IP:127.0.0.1,DNS:localhost";
  for (const auto& d : dns_names) sans += ",DNS:" + d;
  return Run("printf 'subjectAltName=" + sans +
             "\\nextendedKeyUsage=serverAuth,clientAuth\\nkeyUsage=critical,digitalSignature\\n' "
             "> " +
             name + ".ext\n" + "openssl req " + kKeyArgs + " -keyout " + name + ".key -out " +
             name + ".csr -subj /CN=" + name + "\n" + "openssl x509 -req -in " + name +
             ".csr -CA " + ca + ".crt -CAkey " + ca + ".key -CAcreateserial -days 2 -extfile " +
             name + ".ext -out " + name + ".crt\n");
}

}  // namespace etcdw::testing

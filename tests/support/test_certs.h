// Certificates for TLS tests, generated with the openssl command line into a temporary
// directory that is removed with the object. Keys are EC P-256 (fast to generate); leaf
// certificates carry serverAuth and clientAuth and are valid for 127.0.0.1 and localhost plus
// any extra DNS names.
#pragma once

#include <string>
#include <vector>

#include "scratch_dir.h"

namespace etcdw::testing {

class TestCerts {
 public:
  TestCerts();
  ~TestCerts();
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  // A self-signed CA `name` (name.crt, name.key). False on failure, see log().
  bool AddCa(const std::string& name);
  // name.crt / name.key signed by CA `ca`.
  bool Issue(const std::string& name, const std::string& ca,
             const std::vector<std::string>& dns_names = {});

  std::string Crt(const std::string& name) const { return dir_ + "/" + name + ".crt"; }
  std::string Key(const std::string& name) const { return dir_ + "/" + name + ".key"; }
  std::string File(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }
  // The output of the last openssl run (for failure messages).
  std::string log() const;

 private:
  bool Run(const std::string& script);
  testsupport::ScratchDir scratch_;  // removed with everything in it
  std::string dir_;
};

}  // namespace etcdw::testing

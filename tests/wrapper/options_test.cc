#include "etcdw/wrapper/options.h"

#include <gtest/gtest.h>

namespace etcdw::wrapper {
namespace {

StartEtcdOptions Parse(const std::vector<std::string>& args) {
  common::FlagSet f("start-etcd");
  StartEtcdOptions o;
  RegisterStartEtcdFlags(f, &o);
  auto r = f.Parse(args);
  EXPECT_EQ(r.outcome, common::FlagSet::Outcome::kOk) << r.error;
  return o;
}

TEST(StartEtcdOptionsTest, DefaultsAreGardeners) {
  StartEtcdOptions o = Parse({});
  EXPECT_EQ(o.wrapper_port, 9095);
  EXPECT_FALSE(o.sidecar_tls);
  EXPECT_EQ(o.sidecar_host_port, ":8080");
  EXPECT_EQ(o.etcd_client_port, 2379);
  EXPECT_EQ(o.ready_timeout.count(), 0);
  EXPECT_EQ(o.exit_code_file, "/var/etcd/data/exit_code");
  EXPECT_TRUE(ValidateStartEtcdOptions(o).ok());
  EXPECT_EQ(o.SidecarBaseUrl(), "http://:8080");
  EXPECT_EQ(o.SidecarServerName(), "localhost");
}

TEST(StartEtcdOptionsTest, BothFlagFormsAndBools) {
  StartEtcdOptions o = Parse({"-backup-restore-tls-enabled=true", "--backup-restore-host-port",
                              "etcd-main-local:8080", "--backup-restore-ca-cert-bundle-path=/ca",
                              "-etcd-ready-timeout", "2m0s", "--etcd-client-port=0x10"});
  EXPECT_TRUE(o.sidecar_tls);
  EXPECT_EQ(o.sidecar_host_port, "etcd-main-local:8080");
  EXPECT_EQ(o.SidecarServerName(), "etcd-main-local");
  EXPECT_EQ(o.SidecarBaseUrl(), "https://etcd-main-local:8080");
  EXPECT_EQ(o.ready_timeout, std::chrono::minutes(2));
  EXPECT_EQ(o.etcd_client_port, 16);
  EXPECT_TRUE(ValidateStartEtcdOptions(o).ok());
  EXPECT_FALSE(Parse({"--backup-restore-tls-enabled=false"}).sidecar_tls);
}

TEST(StartEtcdOptionsTest, HostPortValidationAsGardener) {
  struct Case {
    const char* host_port;
    bool ok;
  } cases[] = {
      {"2379", false},       {"localhost", false},           {":2379", true},
      {"host:8080", true},   {"etcd-main-local:8080", true}, {"http://localhost:2379", false},
      {"https://h:1", false}};
  for (const auto& c : cases) {
    StartEtcdOptions o;
    o.sidecar_host_port = c.host_port;
    EXPECT_EQ(ValidateStartEtcdOptions(o).ok(), c.ok) << c.host_port;
  }
}

TEST(StartEtcdOptionsTest, EveryProblemIsNamed) {
  StartEtcdOptions o;
  o.sidecar_host_port = "http://x:1";
  o.sidecar_tls = true;
  o.sidecar_ca_file = "  ";
  o.wrapper_port = 70000;
  o.etcd_client_cert = "/c";
  Status st = ValidateStartEtcdOptions(o);
  ASSERT_FALSE(st.ok());
  for (const char* part : {"must not contain a scheme", "--backup-restore-ca-cert-bundle-path",
                           "--etcd-wrapper-port 70000", "--etcd-client-key-path"}) {
    EXPECT_NE(st.message().find(part), std::string::npos) << part << "\n" << st.message();
  }
}

}  // namespace
}  // namespace etcdw::wrapper

// Where the client's configuration comes from: the pod's service account (InClusterConfig), a
// kubeconfig file (LoadKubeconfig) and the choice between them (DefaultConfig); and a
// kubeconfig's embedded CA and client certificate used against a server that checks them.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config_files.h"
#include "files.h"
#include "kube_fixture.h"
#include "scratch_dir.h"

namespace etcdw::kube {
namespace {

using testsupport::ReadFile;
using testsupport::ScratchDir;
using testsupport::WriteFile;

std::string Base64(const std::string& bytes) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t n = (static_cast<uint8_t>(bytes[i]) << 16) |
                       (static_cast<uint8_t>(bytes[i + 1]) << 8) |
                       static_cast<uint8_t>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    out += std::string{kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63], '=', '='};
  } else if (i + 2 == bytes.size()) {
    const uint32_t n =
        (static_cast<uint8_t>(bytes[i]) << 16) | (static_cast<uint8_t>(bytes[i + 1]) << 8);
    out += std::string{kAlphabet[(n >> 18) & 63], kAlphabet[(n >> 12) & 63],
                       kAlphabet[(n >> 6) & 63], '='};
  }
  return out;
}

class InClusterConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    ASSERT_TRUE(WriteFile(File("ca.crt"), "-----BEGIN CERTIFICATE-----\n"));
    ASSERT_TRUE(WriteFile(File("token"), "service-account-token\n"));
    ASSERT_TRUE(WriteFile(File("namespace"), "shoot--dev\n"));
  }
  std::string File(const std::string& name) const { return dir_.path() + "/" + name; }

  ScratchDir dir_{"kube-sa"};
  ScopedEnv host_{"KUBERNETES_SERVICE_HOST", "10.0.0.1"};
  ScopedEnv port_{"KUBERNETES_SERVICE_PORT", "443"};
};

TEST_F(InClusterConfigTest, TheServiceAccountAndTheServiceVariables) {
  auto c = InClusterConfig(dir_.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.0.0.1:443");
  EXPECT_EQ(c->ca_file, File("ca.crt"));
  EXPECT_EQ(c->token_file, File("token"));
  EXPECT_EQ(c->token, "");
  EXPECT_EQ(c->default_namespace, "shoot--dev");
  EXPECT_EQ(c->source, "in-cluster");

  ScopedEnv v6("KUBERNETES_SERVICE_HOST", "fd00::1");
  auto c6 = InClusterConfig(dir_.path());
  ASSERT_TRUE(c6.ok());
  EXPECT_EQ(c6->server, "https://[fd00::1]:443");
}

TEST_F(InClusterConfigTest, AMissingVariableOrFileIsNamed) {
  {
    ScopedEnv unset("KUBERNETES_SERVICE_HOST", std::nullopt);
    auto c = InClusterConfig(dir_.path());
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), Code::kFailedPrecondition);
    EXPECT_NE(c.status().message().find("KUBERNETES_SERVICE_HOST is not set"), std::string::npos);
  }
  {
    ScopedEnv unset("KUBERNETES_SERVICE_PORT", std::nullopt);
    auto c = InClusterConfig(dir_.path());
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find("KUBERNETES_SERVICE_PORT is not set"), std::string::npos);
  }
  std::filesystem::remove(File("token"));
  auto no_token = InClusterConfig(dir_.path());
  ASSERT_FALSE(no_token.ok());
  EXPECT_EQ(no_token.status().message(), "service account token \"" + File("token") +
                                             "\": cannot read: No such file or directory");
  std::filesystem::remove(File("ca.crt"));
  auto no_ca = InClusterConfig(dir_.path());
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find(File("ca.crt")), std::string::npos);
}

TEST_F(InClusterConfigTest, TheNamespaceFileIsOptionalAnEmptyTokenIsNot) {
  std::filesystem::remove(File("namespace"));
  auto c = InClusterConfig(dir_.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->default_namespace, "");
  ASSERT_TRUE(WriteFile(File("token"), "\n"));
  auto empty = InClusterConfig(dir_.path());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);
}

TEST_F(InClusterConfigTest, DefaultConfigIsInClusterWhenTheServiceHostIsSet) {
  // The default service account directory does not exist here: the error names it.
  ScopedEnv kubeconfig("KUBECONFIG", File("never-read"));
  auto c = DefaultConfig();
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(kServiceAccountDir), std::string::npos)
      << c.status().message();
}

class KubeconfigTest : public KubeTest {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()); }
  std::string File(const std::string& name) const { return dir_.path() + "/" + name; }
  // Writes `text` as the kubeconfig and loads it.
  Result<KubeConfig> Load(const std::string& text) {
    EXPECT_TRUE(WriteFile(File("config"), text));
    return LoadKubeconfig(File("config"));
  }
  // Loads `text`, which must fail; returns the message.
  std::string Error(const std::string& text) {
    auto c = Load(text);
    EXPECT_FALSE(c.ok()) << text;
    return c.ok() ? "" : c.status().message();
  }

  ScratchDir dir_{"kubeconfig"};
};

constexpr char kTwoContexts[] = R"(apiVersion: v1
kind: Config
clusters:
- name: dev
  cluster:
    server: https://dev.example:6443
    certificate-authority: certs/ca.crt
- name: prod
  cluster:
    server: https://10.1.2.3
    certificate-authority-data: Q0EgYnl0ZXM=
    insecure-skip-tls-verify: false
contexts:
- name: dev
  context: {cluster: dev, user: dev-user}
- name: prod
  context:
    cluster: prod
    user: prod-user
    namespace: garden
current-context: prod
users:
- name: dev-user
  user:
    tokenFile: secrets/token
    client-certificate: /abs/client.crt
    client-key: client.key
- name: prod-user
  user:
    token: prod-token
    client-certificate-data: Q0VSVA==
    client-key-data: S0VZ
)";

TEST_F(KubeconfigTest, TheCurrentContextsClusterAndUser) {
  auto c = Load(kTwoContexts);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://10.1.2.3");
  EXPECT_EQ(c->ca_pem, "CA bytes");
  EXPECT_EQ(c->ca_file, "");
  EXPECT_FALSE(c->insecure_skip_tls_verify);
  EXPECT_EQ(c->token, "prod-token");
  EXPECT_EQ(c->cert_pem, "CERT");
  EXPECT_EQ(c->key_pem, "KEY");
  EXPECT_EQ(c->default_namespace, "garden");
  EXPECT_EQ(c->source, File("config"));
}

TEST_F(KubeconfigTest, RelativePathsAreRelativeToTheFile) {
  std::string text = kTwoContexts;
  text.replace(text.find("current-context: prod"), 21, "current-context: dev");
  auto c = Load(text);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->server, "https://dev.example:6443");
  EXPECT_EQ(c->ca_file, File("certs/ca.crt"));
  EXPECT_EQ(c->token_file, File("secrets/token"));
  EXPECT_EQ(c->token, "");
  EXPECT_EQ(c->cert_file, "/abs/client.crt");
  EXPECT_EQ(c->key_file, File("client.key"));
  EXPECT_EQ(c->default_namespace, "");
}

TEST_F(KubeconfigTest, MalformedFilesNameTheFileAndTheEntry) {
  const std::string prefix = "kubeconfig \"" + File("config") + "\": ";
  EXPECT_EQ(Error("clusters: [a, b\n").rfind(prefix + "not valid YAML", 0), 0u);
  EXPECT_EQ(Error("- a list\n"), prefix + "not a map of settings");
  EXPECT_EQ(Error("clusters: []\n"), prefix + "current-context is not set");
  EXPECT_EQ(Error("current-context: x\ncontexts: []\n"), prefix + "contexts: no entry named \"x\"");
  EXPECT_EQ(Error("current-context: x\ncontexts:\n- name: x\n  context: {user: u}\n"),
            prefix + "context \"x\" names no cluster");
  EXPECT_EQ(Error("current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\n"
                  "clusters: {c: 1}\n"),
            prefix + "clusters is not a list");
  const std::string context =
      "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, "
      "user: u}\n";
  EXPECT_EQ(Error(context + "clusters:\n- name: c\n  cluster: {}\n"),
            prefix + "cluster \"c\" has no server");
  EXPECT_EQ(Error(context + "clusters:\n- name: c\n  cluster: {server: https://h, "
                            "certificate-authority-data: '!!notbase64'}\n"),
            prefix + "cluster \"c\".certificate-authority-data is not valid base64");
  EXPECT_EQ(Error(context + "clusters:\n- name: c\n  cluster: {server: https://h, "
                            "insecure-skip-tls-verify: maybe}\n"),
            prefix + "cluster \"c\".insecure-skip-tls-verify is not true or false: \"maybe\"");
  const std::string cluster = context + "clusters:\n- name: c\n  cluster: {server: https://h}\n";
  EXPECT_EQ(Error(cluster), prefix + "users: no entry named \"u\"");
  EXPECT_EQ(Error(cluster + "users:\n- name: u\n  user:\n    exec: {command: gke-auth}\n"),
            prefix + "user \"u\" uses exec, which is not supported");
  EXPECT_EQ(Error(cluster + "users:\n- name: u\n  user:\n    token: [a]\n"),
            prefix + "user \"u\".token is not a string");

  auto missing = LoadKubeconfig(File("absent"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find(File("absent")), std::string::npos);
}

TEST_F(KubeconfigTest, DefaultConfigReadsTheFirstKubeconfigThenHome) {
  ScopedEnv not_in_cluster("KUBERNETES_SERVICE_HOST", std::nullopt);
  ASSERT_TRUE(WriteFile(File("config"), kTwoContexts));
  {
    ScopedEnv kubeconfig("KUBECONFIG", File("config") + ":" + File("other"));
    auto c = DefaultConfig();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->source, File("config"));
  }
  ScopedEnv no_kubeconfig("KUBECONFIG", std::nullopt);
  ScopedEnv home("HOME", dir_.path());
  std::filesystem::create_directories(File(".kube"));
  ASSERT_TRUE(WriteFile(File(".kube/config"), kTwoContexts));
  auto c = DefaultConfig();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->source, File(".kube/config"));
}

// The kubeconfig's -data fields reach the TLS handshake: the server is verified with the
// embedded CA, and the embedded client certificate authenticates us (no token).
TEST_F(KubeconfigTest, EmbeddedCaAndClientCertificateAreUsed) {
  auto o = TlsServerOptions();
  o.token.clear();
  o.client_ca_file = certs_->Crt("ca");
  StartServer(o);
  server_->Put(kNs, LeaseObject("member", "etcd-0"));
  const auto config = [&](bool with_client_cert) {
    std::string text =
        "current-context: t\ncontexts:\n- name: t\n  context: {cluster: c, user: u}\n"
        "clusters:\n- name: c\n  cluster:\n    server: " +
        server_->url() +
        "\n    certificate-authority-data: " + Base64(ReadFile(certs_->Crt("ca"))) +
        "\nusers:\n- name: u\n  user:\n";
    if (with_client_cert) {
      text += "    client-certificate-data: " + Base64(ReadFile(certs_->Crt("client"))) +
              "\n    client-key-data: " + Base64(ReadFile(certs_->Key("client"))) + "\n";
    } else {
      text += "    token: not-accepted\n";
    }
    auto c = Load(text);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : KubeConfig{};
  };
  auto client = NewClient(config(true));
  ASSERT_TRUE(client);
  auto lease = client->GetLease(kNs, "member");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->holder_identity, "etcd-0");

  auto anonymous = NewClient(config(false));
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->GetLease(kNs, "member").status().code(), Code::kUnauthenticated);
}

TEST_F(KubeconfigTest, CreateRefusesUnusableSettings) {
  KubeConfig c;
  c.server = "ftp://h";
  EXPECT_EQ(KubeClient::Create(c).status().message(),
            "server \"ftp://h\": the scheme must be https:// or http://");
  c.server = "https://";
  EXPECT_FALSE(KubeClient::Create(c).ok());
  c.server = "https://h:99999";
  EXPECT_FALSE(KubeClient::Create(c).ok());
  c.server = "https://[::1]:6443";
  c.insecure_skip_tls_verify = true;
  EXPECT_TRUE(KubeClient::Create(c).ok());
  c.cert_pem = "CERT";
  c.source = "kc";
  EXPECT_EQ(KubeClient::Create(c).status().message(),
            "kc: a client certificate needs its key, and a key its certificate");
  c.key_file = "/k";
  EXPECT_EQ(KubeClient::Create(c).status().message(),
            "kc: the client certificate and key must both be files or both data");
  c.cert_pem.clear();
  c.key_file.clear();
  c.ca_file = File("missing-ca.crt");
  c.insecure_skip_tls_verify = false;
  auto no_ca = KubeClient::Create(c);
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.status().message().find(c.ca_file), std::string::npos);
}

TEST(KubeFilesTest, PathsResolveAgainstTheFilesDirectory) {
  EXPECT_EQ(ResolveRelativeTo("/etc/kube/config", "ca.crt"), "/etc/kube/ca.crt");
  EXPECT_EQ(ResolveRelativeTo("/etc/kube/config", "/abs/ca.crt"), "/abs/ca.crt");
  EXPECT_EQ(ResolveRelativeTo("config", "ca.crt"), "ca.crt");
  EXPECT_EQ(ResolveRelativeTo("/etc/kube/config", ""), "");
}

}  // namespace
}  // namespace etcdw::kube

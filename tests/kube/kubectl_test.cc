// kubectl, the real client, against the test API server over HTTPS: a kubeconfig with the test
// CA and a bearer token, then create, annotate, patch, get and delete a Lease. What the server
// holds afterwards is checked through its hooks, and kubectl's own output is checked too.
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "etcdw/common/url.h"
#include "files.h"
#include "kube_fixture.h"
#include "process.h"
#include "scratch_dir.h"

namespace etcdw::kube {
namespace {

using nlohmann::json;

// kubectl on PATH, or "" when there is none.
std::string FindKubectl() {
  const char* path = std::getenv("PATH");
  for (const auto& dir : common::Split(path ? path : "", ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/kubectl";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

class KubectlTest : public KubeTest {
 protected:
  void SetUp() override {
    kubectl_ = FindKubectl();
    if (kubectl_.empty()) GTEST_SKIP() << "kubectl is not installed";
    ASSERT_FALSE(dir_.path().empty());
    StartServer();
    // The CA by a path relative to the kubeconfig, as kubectl resolves it too.
    ASSERT_TRUE(
        testsupport::WriteFile(dir_.path() + "/ca.crt", testsupport::ReadFile(certs_->Crt("ca"))));
    const std::string kubeconfig =
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n"
        "  cluster:\n    server: " +
        server_->url() +
        "\n    certificate-authority: ca.crt\n"
        "contexts:\n- name: test\n  context:\n    cluster: test\n"
        "    user: test\n    namespace: " +
        std::string(kNs) +
        "\ncurrent-context: test\n"
        "users:\n- name: test\n  user:\n    token: " +
        std::string(kToken) + "\n";
    ASSERT_TRUE(testsupport::WriteFile(Kubeconfig(), kubeconfig));
  }
  std::string Kubeconfig() const { return dir_.path() + "/kubeconfig"; }

  // Runs kubectl with our kubeconfig and its own cache directory; returns its exit status.
  int Kubectl(std::vector<std::string> args, std::string* out, std::string* err) {
    args.insert(args.begin(), {kubectl_, "--kubeconfig=" + Kubeconfig(),
                               "--cache-dir=" + dir_.path() + "/cache", "--request-timeout=20s"});
    return etcdw::testing::RunCommandSplit(args, out, err, std::chrono::seconds(60));
  }

  // The requests of one method the server saw, with their content types.
  std::vector<etcdw::testing::KubeApiRequest> Requests(const std::string& method) const {
    std::vector<etcdw::testing::KubeApiRequest> out;
    for (auto& r : server_->requests()) {
      if (r.method == method) out.push_back(r);
    }
    return out;
  }

  std::string kubectl_;
  testsupport::ScratchDir dir_{"kubectl"};
};

TEST_F(KubectlTest, CreateAnnotatePatchGetAndDeleteALease) {
  std::string out, err;
  ASSERT_TRUE(testsupport::WriteFile(dir_.path() + "/lease.yaml",
                                     "apiVersion: coordination.k8s.io/v1\nkind: Lease\n"
                                     "metadata:\n  name: etcd-main-0\nspec:\n"
                                     "  holderIdentity: etcd-main-0\n"
                                     "  leaseDurationSeconds: 40\n"));
  ASSERT_EQ(Kubectl({"create", "-f", dir_.path() + "/lease.yaml"}, &out, &err), 0) << err;
  EXPECT_EQ(out, "lease.coordination.k8s.io/etcd-main-0 created\n");
  auto stored = server_->Get(kNs, "etcd-main-0");
  ASSERT_TRUE(stored);
  EXPECT_EQ((*stored)["spec"]["holderIdentity"], "etcd-main-0");

  ASSERT_EQ(Kubectl({"annotate", "lease", "etcd-main-0", "full-snapshot-revision=42"}, &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "lease.coordination.k8s.io/etcd-main-0 annotated\n");
  EXPECT_EQ(
      server_->Get(kNs, "etcd-main-0").value()["metadata"]["annotations"]["full-snapshot-revision"],
      "42");

  ASSERT_EQ(Kubectl({"patch", "lease", "etcd-main-0", "--type", "merge", "-p",
                     R"({"spec":{"holderIdentity":"etcd-main-1"}})"},
                    &out, &err),
            0)
      << err;
  EXPECT_EQ(out, "lease.coordination.k8s.io/etcd-main-0 patched\n");
  const auto patches = Requests("PATCH");
  ASSERT_EQ(patches.size(), 2u);
  EXPECT_EQ(patches[1].content_type, "application/merge-patch+json");
  EXPECT_EQ(patches[1].bearer_token, kToken);

  ASSERT_EQ(Kubectl({"get", "lease", "etcd-main-0", "-o", "json"}, &out, &err), 0) << err;
  const json got = json::parse(out, nullptr, false);
  ASSERT_FALSE(got.is_discarded()) << out;
  EXPECT_EQ(got["spec"]["holderIdentity"], "etcd-main-1");
  EXPECT_EQ(got["metadata"]["annotations"]["full-snapshot-revision"], "42");
  EXPECT_EQ(got["metadata"]["resourceVersion"],
            server_->Get(kNs, "etcd-main-0").value()["metadata"]["resourceVersion"]);

  // Our client reads what kubectl wrote.
  auto client = NewClient(ConfigForServer());
  ASSERT_TRUE(client);
  auto lease = client->GetLease(kNs, "etcd-main-0");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->holder_identity, "etcd-main-1");

  ASSERT_EQ(Kubectl({"delete", "lease", "etcd-main-0"}, &out, &err), 0) << err;
  EXPECT_EQ(out, "lease.coordination.k8s.io \"etcd-main-0\" deleted\n");
  EXPECT_FALSE(server_->Get(kNs, "etcd-main-0"));
}

TEST_F(KubectlTest, ErrorsReachKubectlAsTheApisMessages) {
  std::string out, err;
  EXPECT_NE(Kubectl({"get", "lease", "absent"}, &out, &err), 0);
  EXPECT_NE(err.find("leases.coordination.k8s.io \"absent\" not found"), std::string::npos) << err;
  ASSERT_TRUE(testsupport::WriteFile(dir_.path() + "/odd.yaml",
                                     "apiVersion: coordination.k8s.io/v1\nkind: Lease\n"
                                     "metadata:\n  name: odd\nspec:\n  holder: typo\n"));
  EXPECT_NE(Kubectl({"create", "-f", dir_.path() + "/odd.yaml"}, &out, &err), 0);
  EXPECT_NE(err.find("unknown field \"spec.holder\""), std::string::npos) << err;
  EXPECT_FALSE(server_->Get(kNs, "odd"));
  server_->SetToken("another");
  EXPECT_NE(Kubectl({"get", "lease", "absent"}, &out, &err), 0);
  EXPECT_NE(err.find("Unauthorized"), std::string::npos) << err;
}

}  // namespace
}  // namespace etcdw::kube

#include "etcdw/common/config.h"

#include <gtest/gtest.h>

namespace etcdw::common {
namespace {

TEST(ConfigTest, EmptyDocumentGivesEtcdDefaults) {
  auto cfg = ParseConfig("", "test");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  EXPECT_EQ(cfg->name, "default");
  EXPECT_EQ(cfg->data_dir, "default.etcd");
  EXPECT_EQ(JoinUrls(cfg->listen_client_urls), "http://localhost:2379");
  EXPECT_EQ(cfg->max_request_bytes, 1572864u);
  EXPECT_EQ(cfg->max_txn_ops, 128u);
  EXPECT_EQ(cfg->initial_cluster.at("default").front().ToString(), "http://localhost:2380");
}

TEST(ConfigTest, BadUrlNamesTheKey) {
  auto cfg = ParseConfig("listen-client-urls: ftp://127.0.0.1:1\n", "f.yaml");
  ASSERT_FALSE(cfg.ok());
  EXPECT_EQ(cfg.status().message(),
            "f.yaml: listen-client-urls: URL scheme must be http or https: ftp://127.0.0.1:1");
}

}  // namespace
}  // namespace etcdw::common

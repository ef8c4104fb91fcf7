// The sidecar's HTTP API on a sidecar that is not the backup leader: snapshot triggers are
// delegated to the leader's sidecar (a scripted HTTP server here) as gardener's are. And its
// /metrics page: gardener's families, names, HELP texts, types and zero series.
#include "etcdw/sidecar/http_api.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "etcdw/sidecar/local_store.h"
#include "etcdw/sidecar/metrics.h"
#include "support/scratch_dir.h"

namespace etcdw::sidecar {
namespace {

namespace fs = std::filesystem;

common::HttpRequest Get(const std::string& target) {
  common::HttpRequest r;
  r.method = "GET";
  r.target = target;
  r.path = target.substr(0, target.find('?'));
  return r;
}

class DelegationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<testsupport::ScratchDir>("http-api");
    dir_ = scratch_->path();
    ASSERT_FALSE(scratch_->path().empty());
    auto store = NewLocalStore(dir_ + "/store", "p");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    // The leader's sidecar: healthy or not, and echoing what it was asked.
    auto leader =
        common::HttpServer::Start({.host = "127.0.0.1"}, [this](const common::HttpRequest& r) {
          ++leader_calls_;
          if (r.path == "/healthz") {
            return leader_healthy_
                       ? common::HttpResponse{.status = 200, .body = R"({"health":true})"}
                       : common::HttpResponse{.status = 503, .body = R"({"health":false})"};
          }
          common::HttpResponse out{.status = 200,
                                   .body = "leader answered " + r.target + " delegated=" +
                                           (r.headers.count("x-etcdw-delegated") ? "yes" : "no")};
          out.headers["Content-Type"] = "application/json";
          return out;
        });
    ASSERT_TRUE(leader.ok()) << leader.status().ToString();
    leader_ = std::move(leader).value();
  }
  void TearDown() override {
    leader_.reset();
    scratch_.reset();
  }

  // A follower's API whose leader lookup answers `url` (or fails when empty).
  std::unique_ptr<HttpApi> Follower(const std::string& url) {
    HttpApi::Deps d;
    d.store = store_.get();
    d.leader_sidecar_url = [url]() -> Result<std::string> {
      if (url.empty()) return Unavailable("no leader");
      return url;
    };
    return std::make_unique<HttpApi>(std::move(d));
  }
  std::string LeaderUrl() const { return "http://127.0.0.1:" + std::to_string(leader_->port()); }

  std::unique_ptr<testsupport::ScratchDir> scratch_;  // removed by TearDown
  std::string dir_;
  std::unique_ptr<SnapStore> store_;
  std::unique_ptr<common::HttpServer> leader_;
  std::atomic<bool> leader_healthy_{true};
  std::atomic<int> leader_calls_{0};
};

TEST_F(DelegationTest, SnapshotTriggersGoToTheHealthyLeaderWithTheirQuery) {
  auto api = Follower(LeaderUrl());
  auto full = api->Handle(Get("/snapshot/full?final=true"));
  EXPECT_EQ(full.status, 200);
  EXPECT_EQ(full.body, "leader answered /snapshot/full?final=true delegated=yes");
  EXPECT_EQ(full.headers["Content-Type"], "application/json");
  auto delta = api->Handle(Get("/snapshot/delta"));
  EXPECT_EQ(delta.status, 200);
  EXPECT_EQ(delta.body, "leader answered /snapshot/delta delegated=yes");
}

TEST_F(DelegationTest, RefusedWithoutAHealthyReachableLeader) {
  leader_healthy_ = false;
  EXPECT_EQ(Follower(LeaderUrl())->Handle(Get("/snapshot/full")).status, 405);
  EXPECT_EQ(leader_calls_.load(), 1);  // the health check only
  leader_healthy_ = true;
  EXPECT_EQ(Follower("")->Handle(Get("/snapshot/full")).status, 405);  // no leader known
  EXPECT_EQ(Follower("http://127.0.0.1:1")->Handle(Get("/snapshot/delta")).status, 405);
  EXPECT_EQ(Follower("not a url")->Handle(Get("/snapshot/delta")).status, 405);
  // No delegation configured at all.
  HttpApi::Deps d;
  d.store = store_.get();
  EXPECT_EQ(HttpApi(std::move(d)).Handle(Get("/snapshot/full")).status, 405);
}

TEST_F(DelegationTest, ADelegatedRequestIsNeverDelegatedAgain) {
  auto req = Get("/snapshot/full");
  req.headers["x-etcdw-delegated"] = "1";
  EXPECT_EQ(Follower(LeaderUrl())->Handle(req).status, 405);
  EXPECT_EQ(leader_calls_.load(), 0);
}

TEST_F(DelegationTest, LatestIsAnsweredFromTheSharedStore) {
  auto r = Follower(LeaderUrl())->Handle(Get("/snapshot/latest"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"deltaSnapshots":null,"fullSnapshot":null})");
  EXPECT_EQ(leader_calls_.load(), 0);
}

// Found by the sidecar_http_api fuzzer: one object whose name is not UTF-8 made the answer's JSON
// throw (500 "internal error") instead of listing the latest set.
TEST_F(DelegationTest, LatestListsANameThatIsNotUtf8) {
  fs::create_directories(dir_ + "/store/p/v2");
  std::ofstream(dir_ + "/store/p/v2/Full-00000000-00000007-1700000000.\xff") << "x";
  auto r = Follower(LeaderUrl())->Handle(Get("/snapshot/latest"));
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["fullSnapshot"]["snapName"], "Full-00000000-00000007-1700000000.\xef\xbf\xbd");
  EXPECT_EQ(j["fullSnapshot"]["lastRevision"], 7);
}

TEST_F(DelegationTest, NoStoreMeansNoSnapshotRoutes) {
  HttpApi::Deps d;
  d.leader_sidecar_url = [this]() -> Result<std::string> { return LeaderUrl(); };
  HttpApi api(std::move(d));
  EXPECT_EQ(api.Handle(Get("/snapshot/full")).status, 405);
  EXPECT_EQ(api.Handle(Get("/snapshot/latest")).status, 405);
  EXPECT_EQ(leader_calls_.load(), 0);
}

// The text gardener's sidecar writes for these families before anything happened (its
// pkg/metrics: every pre-initialised label combination at zero; histograms with the default
// buckets), the network counters' values masked.
std::string ZeroHistogram(const std::string& name, const std::string& labels) {
  std::string out;
  const std::string l = labels.empty() ? "" : labels + ",";
  for (const char* le :
       {"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"}) {
    out += name + "_bucket{" + l + "le=\"" + le + "\"} 0\n";
  }
  const std::string braced = labels.empty() ? "" : "{" + labels + "}";
  return out + name + "_sum" + braced + " 0\n" + name + "_count" + braced + " 0\n";
}

std::string OutcomeHistograms(const std::string& name, const std::string& labels) {
  const std::string l = labels.empty() ? "" : labels + ",";
  return ZeroHistogram(name, l + "succeeded=\"false\"") +
         ZeroHistogram(name, l + "succeeded=\"true\"");
}

std::string GardenersFreshPage() {
  std::string p;
  auto head = [&p](const std::string& name, const std::string& help, const std::string& type) {
    p += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  head("etcdbr_add_learner_duration_seconds",
       "Total latency to add the etcd member as a learner to the cluster.", "histogram");
  p += OutcomeHistograms("etcdbr_add_learner_duration_seconds", "");
  head("etcdbr_cluster_size", "Current Etcd cluster size.", "gauge");
  p += "etcdbr_cluster_size 0\n";
  head("etcdbr_defragmentation_duration_seconds",
       "Total latency distribution of defragmentation of each etcd cluster member.", "histogram");
  p += OutcomeHistograms("etcdbr_defragmentation_duration_seconds", "endpoint=\"\"");
  head("etcdbr_is_learner", "Whether or not this member is a learner. 1 if is, 0 otherwise",
       "gauge");
  p += "etcdbr_is_learner 0\n";
  head("etcdbr_is_learner_count_total", "Total count when etcd member added as a learner.",
       "counter");
  p += "etcdbr_is_learner_count_total{succeeded=\"false\"} 0\n"
       "etcdbr_is_learner_count_total{succeeded=\"true\"} 0\n";
  head("etcdbr_member_promote_duration_seconds",
       "Total latency to promote the learner to the voting member.", "histogram");
  p += OutcomeHistograms("etcdbr_member_promote_duration_seconds", "");
  head("etcdbr_member_remove_duration_seconds",
       "Total latency to remove the etcd member from the cluster.", "histogram");
  p += OutcomeHistograms("etcdbr_member_remove_duration_seconds", "");
  head("etcdbr_network_received_bytes", "Number of bytes received over network.", "counter");
  p += "etcdbr_network_received_bytes N\n";
  head("etcdbr_network_transmitted_bytes", "Number of bytes transmitted over network.", "counter");
  p += "etcdbr_network_transmitted_bytes N\n";
  head("etcdbr_restoration_duration_seconds",
       "Total latency distribution required to restore the etcd member.", "histogram");
  p += OutcomeHistograms("etcdbr_restoration_duration_seconds", "restore=\"single_member\"");
  p += OutcomeHistograms("etcdbr_restoration_duration_seconds", "restore=\"single_node\"");
  head("etcdbr_snapshot_duration_seconds",
       "Total latency distribution of saving snapshot to object store.", "histogram");
  for (const char* kind : {"Chunk", "Full", "Incr"}) {
    p +=
        OutcomeHistograms("etcdbr_snapshot_duration_seconds", std::string("kind=\"") + kind + "\"");
  }
  head("etcdbr_snapshot_gc_total", "Total number of garbage collected snapshots.", "counter");
  for (const char* kind : {"Chunk", "Full", "Incr"}) {
    for (const char* ok : {"false", "true"}) {
      p += std::string("etcdbr_snapshot_gc_total{kind=\"") + kind + "\",succeeded=\"" + ok +
           "\"} 0\n";
    }
  }
  for (const auto& [name, help] : std::vector<std::pair<std::string, std::string>>{
           {"etcdbr_snapshot_latest_revision", "Revision number of latest snapshot taken."},
           {"etcdbr_snapshot_latest_timestamp", "Timestamp of latest snapshot taken."},
           {"etcdbr_snapshot_required", "Indicates whether a snapshot is required to be taken."}}) {
    head(name, help, "gauge");
    for (const char* kind : {"Chunk", "Full", "Incr"}) {
      p += name + "{kind=\"" + kind + "\"} 0\n";
    }
  }
  head("etcdbr_snapshotter_failure", "Total number of snapshotter errors.", "counter");
  p += "etcdbr_snapshotter_failure{error=\"\"} 0\n";
  head("etcdbr_snapstore_latest_deltas_revisions_total",
       "Total number of revisions stored in delta snapshots taken since the latest full "
       "snapshot.",
       "gauge");
  p += "etcdbr_snapstore_latest_deltas_revisions_total 0\n";
  head("etcdbr_snapstore_latest_deltas_total",
       "Total number of delta snapshots taken since the latest full snapshot.", "gauge");
  p += "etcdbr_snapstore_latest_deltas_total 0\n";
  head("etcdbr_validation_duration_seconds",
       "Total latency distribution of validating data directory.", "histogram");
  p += OutcomeHistograms("etcdbr_validation_duration_seconds", "");
  return p;
}

// The page's etcdbr_* lines, the network counters' values replaced by "N".
std::string EtcdbrPart(const std::string& page) {
  std::istringstream in(page);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    const bool sample = line.rfind("etcdbr_", 0) == 0;
    if (!sample && line.find(" etcdbr_") == std::string::npos) continue;
    if (sample && line.rfind("etcdbr_network_", 0) == 0)
      line = line.substr(0, line.find(' ')) + " N";
    out += line + "\n";
  }
  return out;
}

TEST(SidecarMetricsTest, AFreshPageIsGardenersZeroSeries) {
  SidecarMetrics metrics;
  HttpApi::Deps d;
  d.metrics = &metrics;
  HttpApi api(std::move(d));
  auto r = api.Handle(Get("/metrics"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(EtcdbrPart(r.body), GardenersFreshPage());
  // Go's process collector (1.20 and later), and promhttp's accounting of this very scrape.
  for (const char* family :
       {"process_cpu_seconds_total counter", "process_max_fds gauge",
        "process_network_receive_bytes_total counter",
        "process_network_transmit_bytes_total counter", "process_open_fds gauge",
        "process_resident_memory_bytes gauge", "process_start_time_seconds gauge",
        "process_virtual_memory_bytes gauge", "process_virtual_memory_max_bytes gauge"}) {
    EXPECT_NE(r.body.find(std::string("\n# TYPE ") + family + "\n"), std::string::npos) << family;
  }
  EXPECT_NE(r.body.find("\npromhttp_metric_handler_requests_in_flight 1\n"), std::string::npos);
  EXPECT_NE(r.body.find("\npromhttp_metric_handler_requests_total{code=\"200\"} 0\n"),
            std::string::npos);
  // No Go runtime here: no go_* families. No etcd's os_fd_* either.
  EXPECT_EQ(r.body.find("go_"), std::string::npos);
  EXPECT_EQ(r.body.find("os_fd_"), std::string::npos);
  auto again = api.Handle(Get("/metrics"));
  EXPECT_NE(again.body.find("\npromhttp_metric_handler_requests_total{code=\"200\"} 1\n"),
            std::string::npos);
  // Without metrics there is no page.
  EXPECT_EQ(HttpApi(HttpApi::Deps()).Handle(Get("/metrics")).status, 404);
}

TEST(SidecarMetricsTest, SeriesMoveAndErrorsAndEndpointsGetSeriesOfTheirOwn) {
  SidecarMetrics m;
  m.SnapshotDuration(MetricKind::kFull).Observe(true, 0.3);
  m.Gc(MetricKind::kChunk).Add(false);
  m.LatestRevision(MetricKind::kIncr).Set(2147483648.0);
  m.CountSnapshotterFailure("failed to get etcd latest revision: \"x\"");
  m.CountSnapshotterFailure("failed to get etcd latest revision: \"x\"");
  m.Defragmentation("http://10.0.0.1:2379").Observe(false, 12);
  const std::string page = m.Text();
  for (const char* line : {
           "etcdbr_snapshot_duration_seconds_bucket{kind=\"Full\",succeeded=\"true\",le=\"0.25\"} "
           "0\n",
           "etcdbr_snapshot_duration_seconds_bucket{kind=\"Full\",succeeded=\"true\",le=\"0.5\"} "
           "1\n",
           "etcdbr_snapshot_duration_seconds_sum{kind=\"Full\",succeeded=\"true\"} 0.3\n",
           "etcdbr_snapshot_gc_total{kind=\"Chunk\",succeeded=\"false\"} 1\n",
           "etcdbr_snapshot_latest_revision{kind=\"Incr\"} 2.147483648e+09\n",
           "etcdbr_snapshotter_failure{error=\"\"} 0\n"
           "etcdbr_snapshotter_failure{error=\"failed to get etcd latest revision: \\\"x\\\"\"} "
           "2\n",
           "etcdbr_defragmentation_duration_seconds_count{endpoint=\"\",succeeded=\"true\"} 0\n"
           "etcdbr_defragmentation_duration_seconds_bucket{endpoint=\"http://10.0.0.1:2379\","
           "succeeded=\"false\",le=\"0.005\"} 0\n",
           "etcdbr_defragmentation_duration_seconds_bucket{endpoint=\"http://10.0.0.1:2379\","
           "succeeded=\"false\",le=\"+Inf\"} 1\n",
       }) {
    EXPECT_NE(page.find(line), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace etcdw::sidecar

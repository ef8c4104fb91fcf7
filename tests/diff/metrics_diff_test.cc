// Differential tests of /metrics: every family we serve is one of etcd's (same name, help and
// type), the same calls move the same counters, and listen-metrics-urls serve what etcd's do.

#include <map>
#include <set>
#include <sstream>

#include "diff_fixture.h"
#include "process.h"

namespace etcdw::testing {
namespace {

// `method` `path` on a port on loopback: the status line, headers without
// Date and the body (a chunked body decoded).
struct HttpAnswer {
  std::string head;
  std::string body;
};

HttpAnswer Request(int port, const std::string& method, const std::string& path) {
  HttpAnswer a;
  const std::string got =
      HttpExchange(port, method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" +
                             (method == "POST" ? "Content-Length: 0\r\n" : "") + "\r\n");
  const size_t end = got.find("\r\n\r\n");
  if (end == std::string::npos) {
    a.head = got;
    return a;
  }
  std::istringstream lines(got.substr(0, end));
  bool chunked = false;
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("Date: ", 0) == 0 || line.rfind("Connection: ", 0) == 0) continue;
    // Framing differs legitimately (Go streams big pages chunked).
    if (line == "Transfer-Encoding: chunked") {
      chunked = true;
      continue;
    }
    if (line.rfind("Content-Length: ", 0) == 0 && path == "/metrics") continue;
    a.head += line + "\n";
  }
  std::string body = got.substr(end + 4);
  if (chunked) {
    for (size_t at = 0; at < body.size();) {
      const size_t eol = body.find("\r\n", at);
      const size_t len = std::stoul(body.substr(at, eol - at), nullptr, 16);
      if (len == 0) break;
      a.body += body.substr(eol + 2, len);
      at = eol + 2 + len + 2;
    }
  } else {
    a.body = body;
  }
  return a;
}

struct Page {
  std::set<std::string> heads;            // "# HELP ..." and "# TYPE ..." lines
  std::map<std::string, double> samples;  // series -> value
  std::set<std::string> families;         // names from the TYPE lines
};

Page Parse(const std::string& text) {
  Page p;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    if (line[0] == '#') {
      p.heads.insert(line);
      if (line.rfind("# TYPE ", 0) == 0) p.families.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    const size_t sp = line.rfind(' ');
    p.samples[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return p;
}

Page Scrape(Member& m) {
  HttpAnswer a = Request(m.client_port(), "GET", "/metrics");
  EXPECT_NE(a.head.find("HTTP/1.1 200 OK"), std::string::npos) << m.label() << ": " << a.head;
  EXPECT_NE(a.head.find("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
            std::string::npos)
      << m.label() << ": " << a.head;
  return Parse(a.body);
}

// The series of `family` ("grpc_server_handled_total") in `p` whose labels contain `with`.
std::map<std::string, double> Series(const Page& p, const std::string& family,
                                     const std::string& with = "") {
  std::map<std::string, double> out;
  for (const auto& [series, value] : p.samples) {
    if (series.rfind(family, 0) != 0) continue;
    const std::string rest = series.substr(family.size());
    if (!rest.empty() && rest[0] != '{') continue;
    if (series.find(with) == std::string::npos) continue;
    out[series] = value;
  }
  return out;
}

TEST_F(DiffTest, MetricsFamiliesAreEtcds) {
  StartBoth();
  Put("k", "v");
  Page etcd_page = Scrape(etcd());
  Page ours_page = Scrape(ours());
  // Everything we serve is named, described and typed as etcd describes it.
  for (const std::string& head : ours_page.heads) {
    EXPECT_TRUE(etcd_page.heads.count(head)) << "not etcd's: " << head;
  }
  // What dashboards and gardener's alerts read is there.
  for (const char* family :
       {"etcd_server_has_leader", "etcd_server_is_leader", "etcd_server_leader_changes_seen_total",
        "etcd_server_proposals_committed_total", "etcd_server_proposals_applied_total",
        "etcd_server_proposals_pending", "etcd_server_proposals_failed_total",
        "etcd_server_quota_backend_bytes", "etcd_mvcc_db_total_size_in_bytes",
        "etcd_mvcc_db_total_size_in_use_in_bytes", "etcd_disk_wal_fsync_duration_seconds",
        "etcd_disk_backend_commit_duration_seconds", "etcd_debugging_mvcc_keys_total",
        "grpc_server_started_total", "grpc_server_handled_total", "process_resident_memory_bytes",
        "process_cpu_seconds_total", "process_open_fds"}) {
    EXPECT_TRUE(ours_page.families.count(family)) << "missing: " << family;
  }
  // Values that describe the same state alike.
  for (const char* series :
       {"etcd_server_has_leader", "etcd_server_is_learner", "etcd_server_proposals_pending",
        "etcd_debugging_mvcc_keys_total", "etcd_debugging_mvcc_current_revision",
        "etcd_server_quota_backend_bytes"}) {
    EXPECT_EQ(etcd_page.samples[series], ours_page.samples[series]) << series;
  }
  // Our own syncs and commits are measured (etcd's are, too).
  EXPECT_GT(ours_page.samples["etcd_disk_wal_fsync_duration_seconds_count"], 0);
  EXPECT_GT(ours_page.samples["etcd_disk_backend_commit_duration_seconds_count"], 0);
  EXPECT_GT(ours_page.samples["etcd_disk_wal_write_bytes_total"], 0);
}

TEST_F(DiffTest, MetricsCountCallsAsEtcdDoes) {
  StartBoth();
  Put("a", "1");
  Put("b", "2", 0, /*prev_kv=*/true);  // a range, a put and a store txn in etcd's count
  etcdserverpb::PutRequest ignore;
  ignore.set_key("missing");
  ignore.set_ignore_value(true);  // refused after reading the key
  PutReq(ignore);
  Get("a");
  Delete("b", "", /*prev_kv=*/true);
  etcdserverpb::TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key("a");
  cmp->set_target(etcdserverpb::Compare::MOD);
  cmp->set_result(etcdserverpb::Compare::GREATER);
  cmp->set_mod_revision(0);
  *txn.add_success() = OpPut("x", "1", 0, /*prev_kv=*/true);
  *txn.add_success() = OpRange("a");
  Txn(txn);
  etcdserverpb::TxnRequest read_only;
  *read_only.add_compare() = *cmp;
  *read_only.add_compare() = *cmp;
  *read_only.add_success() = OpRange("a");
  Txn(read_only);
  Compact(2);
  Get("a", "", 1);  // compacted: OutOfRange

  Page etcd_page = Scrape(etcd());
  Page ours_page = Scrape(ours());
  for (const char* family :
       {"etcd_mvcc_put_total", "etcd_mvcc_delete_total", "etcd_mvcc_range_total",
        "etcd_mvcc_txn_total", "etcd_debugging_mvcc_put_total", "etcd_debugging_mvcc_txn_total",
        "etcd_debugging_mvcc_keys_total", "etcd_debugging_mvcc_current_revision",
        "etcd_debugging_mvcc_compact_revision"}) {
    EXPECT_EQ(Series(etcd_page, family), Series(ours_page, family)) << family;
  }
  for (const char* family : {"grpc_server_started_total", "grpc_server_handled_total",
                             "grpc_server_msg_received_total", "grpc_server_msg_sent_total"}) {
    const auto theirs = Series(etcd_page, family, "grpc_service=\"etcdserverpb.KV\"");
    EXPECT_EQ(theirs, Series(ours_page, family, "grpc_service=\"etcdserverpb.KV\"")) << family;
    EXPECT_FALSE(theirs.empty()) << family;
  }
  EXPECT_EQ(ours_page.samples["grpc_server_handled_total{grpc_code=\"OutOfRange\",grpc_method="
                              "\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"}"],
            1);
}

// The sum of a family's series in `p` whose labels contain `with`.
double Sum(const Page& p, const std::string& family, const std::string& with) {
  double sum = 0;
  for (const auto& [series, value] : Series(p, family, with)) sum += value;
  return sum;
}

TEST_F(DiffTest, MetricsCountWatchStreamsAsEtcdDoes) {
  StartBoth();
  {
    WatchPair w(etcd(), ours());
    w.Send(CreateWatch("w"));
    w.Next("created");
    Put("w", "1");
    w.Next("event");
    w.Send(CancelWatch(0));
    w.Next("canceled");
  }  // the streams are cancelled (etcd ends a watch stream only then, even after a half-close)
  // Each server counts the stream's end once it has seen the cancellation: wait for both.
  const std::string watch = "grpc_service=\"etcdserverpb.Watch\"";
  Page etcd_page, ours_page;
  WaitUntil([&] {
    etcd_page = Scrape(etcd());
    ours_page = Scrape(ours());
    return Sum(etcd_page, "grpc_server_handled_total", watch) == 1 &&
           Sum(ours_page, "grpc_server_handled_total", watch) == 1;
  });
  for (const char* family : {"grpc_server_started_total", "grpc_server_handled_total",
                             "grpc_server_msg_received_total", "grpc_server_msg_sent_total"}) {
    const auto theirs = Series(etcd_page, family, "grpc_service=\"etcdserverpb.Watch\"");
    EXPECT_EQ(theirs, Series(ours_page, family, "grpc_service=\"etcdserverpb.Watch\"")) << family;
  }
  EXPECT_EQ(
      ours_page
          .samples["grpc_server_started_total{grpc_method=\"Watch\",grpc_service=\"etcdserverpb."
                   "Watch\",grpc_type=\"bidi_stream\"}"],
      1);
  EXPECT_EQ(etcd_page.samples["etcd_debugging_mvcc_watcher_total"],
            ours_page.samples["etcd_debugging_mvcc_watcher_total"]);
}

TEST(MetricsUrlsTest, ServeMetricsAndHealthAsEtcds) {
  Member etcd(Member::Kind::kEtcd);
  Member ours(Member::Kind::kEtcdWrapper);
  const int etcd_port = FreePort();
  const int ours_port = FreePort();
  ASSERT_TRUE(
      etcd.Start({{"listen-metrics-urls", "http://127.0.0.1:" + std::to_string(etcd_port)}}))
      << etcd.log();
  ASSERT_TRUE(
      ours.Start({{"listen-metrics-urls", "http://127.0.0.1:" + std::to_string(ours_port)}}))
      << ours.log();
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/health"}, {"GET", "/version"}, {"GET", "/nope"}, {"POST", "/health"}}) {
    HttpAnswer e = Request(etcd_port, method, path);
    HttpAnswer o = Request(ours_port, method, path);
    EXPECT_EQ(e.head, o.head) << method << " " << path;
    EXPECT_EQ(e.body, o.body) << method << " " << path;
  }
  HttpAnswer e = Request(etcd_port, "GET", "/metrics");
  HttpAnswer o = Request(ours_port, "GET", "/metrics");
  EXPECT_EQ(e.head, o.head);
  // Each served its own member's metrics; the health checks above were counted.
  EXPECT_EQ(Parse(o.body).samples["etcd_server_health_success"], 1);
  EXPECT_EQ(Parse(e.body).samples["etcd_server_health_success"], 1);
}

}  // namespace
}  // namespace etcdw::testing

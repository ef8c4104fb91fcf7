#include "etcdw/common/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace etcdw::common {
namespace {

TEST(MetricsTest, ValuesAreWrittenAsGoWritesThem) {
  // Cases taken from etcd 3.4's own /metrics page (Go's strconv.FormatFloat(v, 'g', -1, 64)).
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(7), "7");
  EXPECT_EQ(FormatMetricValue(-1), "-1");
  EXPECT_EQ(FormatMetricValue(20480), "20480");
  EXPECT_EQ(FormatMetricValue(999999), "999999");
  EXPECT_EQ(FormatMetricValue(1e6), "1e+06");
  EXPECT_EQ(FormatMetricValue(2147483648.0), "2.147483648e+09");
  EXPECT_EQ(FormatMetricValue(0.0057478), "0.0057478");
  EXPECT_EQ(FormatMetricValue(0.0001), "0.0001");
  EXPECT_EQ(FormatMetricValue(0.00001), "1e-05");
  EXPECT_EQ(FormatMetricValue(0.04), "0.04");
  EXPECT_EQ(FormatMetricValue(1795739475.54), "1.79573947554e+09");
  EXPECT_EQ(FormatMetricValue(18446744073709551615.0), "1.8446744073709552e+19");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
}

TEST(MetricsTest, EtcdsDiskBucketsPrintAsEtcdsDo) {
  std::vector<std::string> printed;
  for (double b : ExponentialBuckets(0.001, 2, 14)) printed.push_back(FormatMetricValue(b));
  EXPECT_EQ(printed, (std::vector<std::string>{"0.001", "0.002", "0.004", "0.008", "0.016", "0.032",
                                               "0.064", "0.128", "0.256", "0.512", "1.024", "2.048",
                                               "4.096", "8.192"}));
}

TEST(MetricsTest, HistogramCountsCumulativelyWithBoundsInclusive) {
  Histogram h({0.1, 1, 10});
  for (double v : {0.05, 0.1, 0.5, 1.0, 20.0}) h.Observe(v);
  Histogram::Snapshot s = h.Read();
  // le="0.1" holds 0.05 and 0.1; le="1" adds 0.5 and 1; le="10" nothing more; +Inf adds 20.
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{2, 4, 4, 5}));
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.sum, 21.65);
}

TEST(MetricsTest, HistogramAndCounterTakeConcurrentUpdates) {
  Histogram h({1});
  Counter c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        h.Observe(0.5);
        c.Add(2);
      }
    });
  }
  for (auto& t : threads) t.join();
  Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.count, 40000u);
  EXPECT_DOUBLE_EQ(s.sum, 20000);  // no lost update of the sum
  EXPECT_EQ(c.Value(), 80000u);
}

TEST(MetricsTest, PageSortsFamiliesAndSeriesAndEscapes) {
  MetricsPage page;
  page.Family("zeta_total", "Last.", MetricsPage::Type::kCounter);
  page.Sample({{"method", "Put"}}, 2);
  page.Sample({{"method", "\"odd\\\nname"}}, 1);
  page.Sample({{"method", "Get"}}, 3);
  page.Gauge("alpha", "A back\\slash\nand a line.", 1.5);
  Histogram h({1, 2});
  h.Observe(1.5);
  page.Histogram("mid_seconds", "Middle.", h);
  EXPECT_EQ(page.Text(),
            "# HELP alpha A back\\\\slash\\nand a line.\n"
            "# TYPE alpha gauge\n"
            "alpha 1.5\n"
            "# HELP mid_seconds Middle.\n"
            "# TYPE mid_seconds histogram\n"
            "mid_seconds_bucket{le=\"1\"} 0\n"
            "mid_seconds_bucket{le=\"2\"} 1\n"
            "mid_seconds_bucket{le=\"+Inf\"} 1\n"
            "mid_seconds_sum 1.5\n"
            "mid_seconds_count 1\n"
            "# HELP zeta_total Last.\n"
            "# TYPE zeta_total counter\n"
            "zeta_total{method=\"\\\"odd\\\\\\nname\"} 1\n"
            "zeta_total{method=\"Get\"} 3\n"
            "zeta_total{method=\"Put\"} 2\n");
}

TEST(MetricsTest, ProcessMetricsDescribeThisProcess) {
  MetricsPage page;
  WriteProcessMetrics(page);
  const std::string text = page.Text();
  for (const char* name :
       {"process_cpu_seconds_total ", "process_resident_memory_bytes ",
        "process_virtual_memory_bytes ", "process_virtual_memory_max_bytes ", "process_open_fds ",
        "process_max_fds ", "process_start_time_seconds ", "os_fd_used ", "os_fd_limit "}) {
    EXPECT_NE(text.find(std::string("\n") + name), std::string::npos) << name;
  }
  auto value = [&](const std::string& name) {
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + name.size() + 2));
  };
  EXPECT_GT(value("process_resident_memory_bytes"), 1 << 20);
  EXPECT_GE(value("process_open_fds"), 3);  // stdin, stdout, stderr at least
  // Started after 2020 and not in the future.
  EXPECT_GT(value("process_start_time_seconds"), 1.5e9);
  EXPECT_LT(value("process_start_time_seconds"), static_cast<double>(time(nullptr)) + 1);
}

}  // namespace
}  // namespace etcdw::common

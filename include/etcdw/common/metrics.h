// Prometheus metrics: counters and histograms cheap enough for hot paths (relaxed atomics, no
// locks, no allocation), and the text exposition format (version 0.0.4) that `/metrics` serves,
// laid out as Go's client library writes it (etcd's): families sorted by name, series sorted by
// their labels, numbers in Go's shortest form ("2.147483648e+09").
//
// Values are read when the page is written: a component keeps its own counters and a
// collector (server/server_metrics.h) writes them under etcd's names, so nothing is registered
// globally and a component is testable without a registry.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace etcdw::common {

// `v` as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it (the exposition format's number
// form): "0", "7", "20480", "0.0057478", "1e+06", "2.147483648e+09", "+Inf", "NaN".
std::string FormatMetricValue(double v);

// A monotonic count, added to from any thread.
class Counter {
 public:
  void Add(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// A value set or moved from any thread (a Prometheus gauge).
class Gauge {
 public:
  void Set(double v) { v_.store(v, std::memory_order_relaxed); }
  void Add(double d) { v_.fetch_add(d, std::memory_order_relaxed); }
  double Value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

// Observations counted into buckets by upper bound (Prometheus's cumulative `le` buckets are
// computed when read), with their sum. Observe may run on several threads at once.
class Histogram {
 public:
  // `upper_bounds` ascending; a last bucket "+Inf" is implied.
  explicit Histogram(std::vector<double> upper_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double v);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<uint64_t> sum_bits_{0};                // the double's bits
};

// Seconds from `start` until now (what duration histograms observe).
inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Prometheus's DefBuckets, the buckets of a histogram that names none: .005 to 10 seconds.
std::vector<double> DefaultBuckets();

// Prometheus's ExponentialBuckets: `count` bounds start, start*factor, start*factor^2, ...
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// One exposition page, built family by family in any order.
class MetricsPage {
 public:
  enum class Type { kCounter, kGauge, kHistogram };
  using Labels = std::vector<std::pair<std::string_view, std::string>>;

  // Opens family `name`: its HELP and TYPE lines. Samples follow until the next Family.
  void Family(std::string_view name, std::string_view help, Type type);
  // A sample of the open family; `labels` in the order they are to be printed (Go prints
  // them sorted by name: give them so).
  void Sample(const Labels& labels, double value);
  // The open family's histogram: its buckets, sum and count.
  void Sample(const Labels& labels, const Histogram& h);
  // Shorthands: one family with one unlabelled sample.
  void Counter(std::string_view name, std::string_view help, double value);
  void Gauge(std::string_view name, std::string_view help, double value);
  void Histogram(std::string_view name, std::string_view help, const common::Histogram& h);

  // The page: families by name, each family's series by their label values.
  std::string Text() const;

 private:
  struct Fam {
    std::string head;  // HELP and TYPE lines
    // Each sample's line, after its sort key (its label values, as Go orders series).
    std::vector<std::pair<std::string, std::string>> lines;
  };
  std::string name_;  // the open family
  std::map<std::string, Fam, std::less<>> families_;
};

// The process's own figures under the names Go's process collector and etcd use (from /proc
// and getrlimit): process_cpu_seconds_total, process_resident_memory_bytes,
// process_virtual_memory_bytes, process_virtual_memory_max_bytes, process_open_fds,
// process_max_fds, process_start_time_seconds, os_fd_used, os_fd_limit.
void WriteProcessMetrics(MetricsPage& page);

// The families of the process collector of Go's client library 1.20 and later (what gardener's
// sidecar serves): those of WriteProcessMetrics but os_fd_*, and the bytes the process's network
// namespace received and sent (InOctets and OutOctets of /proc/self/net/netstat):
// process_network_receive_bytes_total, process_network_transmit_bytes_total.
void WriteGoProcessMetrics(MetricsPage& page);

}  // namespace etcdw::common

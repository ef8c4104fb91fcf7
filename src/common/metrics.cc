#include "etcdw/common/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace etcdw::common {

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  // The shortest digits that read back as `v`, in scientific form ("2.147483648e+09"); Go
  // keeps that form when the exponent is below -4 or at least 6 (its rule for the shortest
  // 'g' format), and otherwise writes the same digits without an exponent.
  char buf[64];
  auto sci = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string scientific(buf, sci.ptr);
  const int exp = std::atoi(scientific.c_str() + scientific.find('e') + 1);
  if (exp < -4 || exp >= 6) return scientific;
  auto fixed = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, fixed.ptr);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  // The first bucket whose bound is >= v (Prometheus's `le`); past the last, +Inf's.
  const size_t i =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  uint64_t old_bits = sum_bits_.load(std::memory_order_relaxed);
  while (true) {
    double sum;
    std::memcpy(&sum, &old_bits, sizeof sum);
    sum += v;
    uint64_t new_bits;
    std::memcpy(&new_bits, &sum, sizeof sum);
    if (sum_bits_.compare_exchange_weak(old_bits, new_bits, std::memory_order_relaxed)) break;
  }
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  const uint64_t bits = sum_bits_.load(std::memory_order_relaxed);
  std::memcpy(&s.sum, &bits, sizeof s.sum);
  return s;
}

std::vector<double> DefaultBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> b;
  for (int i = 0; i < count; ++i, start *= factor) b.push_back(start);
  return b;
}

namespace {

// HELP text: backslash and line feed escaped. Label values: the double quote as well.
std::string Escape(std::string_view s, bool quote) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

std::string LabelText(const MetricsPage::Labels& labels, std::string_view le = {}) {
  if (labels.empty() && le.empty()) return "";
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ',';
    out.append(name).append("=\"").append(Escape(value, true)).append("\"");
  }
  if (!le.empty()) {
    if (out.size() > 1) out += ',';
    out.append("le=\"").append(le).append("\"");
  }
  return out + "}";
}

// Counts are written as numbers like any other value ("1.234567e+06"), as the exposition
// library of etcd 3.4's Go client does.
std::string Count(uint64_t n) { return FormatMetricValue(static_cast<double>(n)); }

const char* TypeName(MetricsPage::Type t) {
  switch (t) {
    case MetricsPage::Type::kCounter:
      return "counter";
    case MetricsPage::Type::kGauge:
      return "gauge";
    case MetricsPage::Type::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

void MetricsPage::Family(std::string_view name, std::string_view help, Type type) {
  name_ = std::string(name);
  Fam& f = families_[name_];
  f.head = "# HELP " + name_ + " " + Escape(help, false) + "\n# TYPE " + name_ + " " +
           TypeName(type) + "\n";
}

namespace {

// Go orders a family's series by their label values, label by label.
std::string SortKey(const MetricsPage::Labels& labels) {
  std::string key;
  for (const auto& [name, value] : labels) key.append(value).push_back('\0');
  return key;
}

}  // namespace

void MetricsPage::Sample(const Labels& labels, double value) {
  families_[name_].lines.emplace_back(
      SortKey(labels), name_ + LabelText(labels) + " " + FormatMetricValue(value) + "\n");
}

void MetricsPage::Sample(const Labels& labels, const common::Histogram& h) {
  const common::Histogram::Snapshot s = h.Read();
  // One entry: a histogram's lines stay in their order.
  std::string text;
  for (size_t i = 0; i < s.upper_bounds.size(); ++i) {
    text += name_ + "_bucket" + LabelText(labels, FormatMetricValue(s.upper_bounds[i])) + " " +
            Count(s.cumulative[i]) + "\n";
  }
  text += name_ + "_bucket" + LabelText(labels, "+Inf") + " " + Count(s.count) + "\n";
  text += name_ + "_sum" + LabelText(labels) + " " + FormatMetricValue(s.sum) + "\n";
  text += name_ + "_count" + LabelText(labels) + " " + Count(s.count) + "\n";
  families_[name_].lines.emplace_back(SortKey(labels), std::move(text));
}

void MetricsPage::Counter(std::string_view name, std::string_view help, double value) {
  Family(name, help, Type::kCounter);
  Sample({}, value);
}

void MetricsPage::Gauge(std::string_view name, std::string_view help, double value) {
  Family(name, help, Type::kGauge);
  Sample({}, value);
}

void MetricsPage::Histogram(std::string_view name, std::string_view help,
                            const common::Histogram& h) {
  Family(name, help, Type::kHistogram);
  Sample({}, h);
}

std::string MetricsPage::Text() const {
  std::string out;
  for (const auto& [name, f] : families_) {
    out += f.head;
    auto lines = f.lines;
    std::stable_sort(lines.begin(), lines.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [key, line] : lines) out += line;
  }
  return out;
}

}  // namespace etcdw::common

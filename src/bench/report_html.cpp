// Self-contained HTML report: inline SVG charts, no scripts or files fetched from elsewhere.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/results.h"

namespace atl::bench {

namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr double kW = 640, kH = 300, kLeft = 60, kRight = 150, kTop = 20, kBottom = 40;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

double nice_max(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (v <= m * p) return m * p;
  }
  return 10 * p;
}

struct Frame {
  double x_max, y_max;
  double px(double x) const { return kLeft + (kW - kLeft - kRight) * x / x_max; }
  double py(double y) const { return kH - kBottom - (kH - kTop - kBottom) * y / y_max; }
};

std::string axes(const Frame& f, const std::string& xlabel, const std::string& ylabel, bool x_ticks = true) {
  std::string s =
      fmt::format(R"(<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#333"/>)", kLeft, kH - kBottom, kW - kRight);
  s += fmt::format(R"(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#333"/>)", kLeft, kTop, kH - kBottom);
  for (int i = 0; i <= 4; ++i) {
    const double y = f.y_max * i / 4;
    s +=
        fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end">{:.3g}</text>)", kLeft - 4, f.py(y) + 4, y);
    if (x_ticks) {
      const double x = f.x_max * i / 4;
      s += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="middle">{:.3g}</text>)", f.px(x),
                       kH - kBottom + 14, x);
    }
  }
  s += fmt::format(R"(<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text>)", (kLeft + kW - kRight) / 2,
                   kH - 6, esc(xlabel));
  s += fmt::format(
      R"svg(<text x="14" y="{}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>)svg",
      (kTop + kH - kBottom) / 2, (kTop + kH - kBottom) / 2, esc(ylabel));
  return s;
}

std::string legend(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    const double y = kTop + 16.0 * static_cast<double>(i);
    s +=
        fmt::format(R"(<rect x="{}" y="{}" width="10" height="10" fill="{}"/>)", kW - kRight + 10, y, kPalette[i % 10]);
    s += fmt::format(R"(<text x="{}" y="{}" font-size="11">{}</text>)", kW - kRight + 24, y + 9, esc(names[i]));
  }
  return s;
}

std::string svg(const std::string& id, const std::string& title, const std::string& body) {
  return fmt::format(R"(<h3>{}</h3><svg class="chart" id="{}" width="{}" height="{}" viewBox="0 0 {} {}">{}</svg>)",
                     esc(title), id, kW, kH, kW, kH, body);
}

std::string cdf_chart(const BenchResults& r) {
  double x_max = 0;
  std::vector<std::vector<double>> lat(r.runs.size());
  for (size_t m = 0; m < r.runs.size(); ++m) {
    for (const RequestRecord& q : r.runs[m].requests) {
      if (!q.dropped && !q.failed && r.workload.clients[static_cast<size_t>(q.client)].realtime) {
        lat[m].push_back(q.finish_ms - q.arrival_ms);
      }
    }
    std::sort(lat[m].begin(), lat[m].end());
    if (!lat[m].empty()) x_max = std::max(x_max, lat[m][std::min(lat[m].size() - 1, lat[m].size() * 999 / 1000)]);
  }
  Frame f{nice_max(x_max), 1.0};
  std::string body = axes(f, "RT latency from scheduled arrival (ms)", "fraction of requests");
  std::vector<std::string> names;
  for (size_t m = 0; m < r.runs.size(); ++m) {
    names.push_back(r.runs[m].mode);
    if (lat[m].empty()) continue;
    std::string d;
    const size_t n = lat[m].size();
    const size_t step = std::max<size_t>(1, n / 400);
    for (size_t i = 0; i < n; i += step) {
      d += fmt::format("{}{:.1f},{:.1f} ", d.empty() ? "M" : "L", f.px(std::min(lat[m][i], f.x_max)),
                       f.py(static_cast<double>(i + 1) / static_cast<double>(n)));
    }
    d += fmt::format("L{:.1f},{:.1f}", f.px(std::min(lat[m].back(), f.x_max)), f.py(1.0));
    body +=
        fmt::format(R"(<path class="series" d="{}" fill="none" stroke="{}" stroke-width="1.5"/>)", d, kPalette[m % 10]);
  }
  return svg("rt-latency-cdf", "RT latency CDF per mode", body + legend(names));
}

std::string bar_chart(const std::string& id, const std::string& title, const std::string& ylabel,
                      const std::vector<std::string>& groups, const std::vector<std::string>& series,
                      const std::vector<std::vector<double>>& values) {  // values[group][series]
  double y_max = 0;
  for (const auto& g : values)
    for (double v : g) y_max = std::max(y_max, v);
  Frame f{1.0, nice_max(y_max)};
  std::string body = axes(f, "", ylabel, false);
  const double group_w = (kW - kLeft - kRight) / static_cast<double>(std::max<size_t>(1, groups.size()));
  const double bar_w = group_w * 0.8 / static_cast<double>(std::max<size_t>(1, series.size()));
  for (size_t g = 0; g < groups.size(); ++g) {
    const double x0 = kLeft + group_w * static_cast<double>(g) + group_w * 0.1;
    for (size_t s = 0; s < series.size(); ++s) {
      const double v = values[g][s];
      body += fmt::format(
          R"(<rect class="series" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}"><title>{} {}: {:.4g}</title></rect>)",
          x0 + bar_w * static_cast<double>(s), f.py(v), bar_w, f.py(0) - f.py(v), kPalette[s % 10], esc(groups[g]),
          esc(series[s]), v);
    }
    body += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="11" text-anchor="middle">{}</text>)", x0 + group_w * 0.4,
                        kH - kBottom + 14, esc(groups[g]));
  }
  return svg(id, title, body + legend(series));
}

std::string histogram_chart(const BenchResults& r) {
  double x_max = 0;
  for (const ModeRun& run : r.runs)
    for (double v : run.preemption_latency_us) x_max = std::max(x_max, v);
  x_max = nice_max(x_max);
  constexpr int kBins = 40;
  std::vector<std::vector<double>> counts(r.runs.size(), std::vector<double>(kBins, 0));
  double y_max = 0;
  for (size_t m = 0; m < r.runs.size(); ++m) {
    for (double v : r.runs[m].preemption_latency_us) {
      const int b = std::min(kBins - 1, static_cast<int>(v / x_max * kBins));
      y_max = std::max(y_max, ++counts[m][static_cast<size_t>(b)]);
    }
  }
  Frame f{x_max, nice_max(y_max)};
  std::string body = axes(f, "preemption latency (us)", "preemptions");
  std::vector<std::string> names;
  for (size_t m = 0; m < r.runs.size(); ++m) {
    names.push_back(r.runs[m].mode);
    if (r.runs[m].preemption_latency_us.empty()) continue;
    std::string d = fmt::format("M{:.1f},{:.1f}", f.px(0), f.py(0));
    for (int b = 0; b < kBins; ++b) {
      const double x0 = x_max * b / kBins, x1 = x_max * (b + 1) / kBins;
      d += fmt::format(" L{:.1f},{:.1f} L{:.1f},{:.1f}", f.px(x0), f.py(counts[m][static_cast<size_t>(b)]), f.px(x1),
                       f.py(counts[m][static_cast<size_t>(b)]));
    }
    d += fmt::format(" L{:.1f},{:.1f}", f.px(x_max), f.py(0));
    body +=
        fmt::format(R"(<path class="series" d="{}" fill="none" stroke="{}" stroke-width="1.5"/>)", d, kPalette[m % 10]);
  }
  return svg("preemption-latency", "Preemption latency histogram", body + legend(names));
}

std::string stats_table(const BenchResults& r) {
  std::string s =
      "<table><tr><th>mode</th><th>RT p50 ms</th><th>RT p99 ms</th><th>RT p99 vs rt-only [95%]</th>"
      "<th>RT max ms</th><th>RT miss rate</th>"
      "<th>RT/s</th><th>BE/s</th><th>overall/s</th><th>preemptions</th><th>preempt p50 us</th><th>preempt p99 us</th>"
      "<th>staging p50 us (share)</th><th>staging p99 us (share)</th><th>longest BE wait ms</th></tr>";
  for (const ModeStats& m : r.stats) {
    s += fmt::format(
        "<tr><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{}</td><td>{:.3f}</td><td>{:.2f}%</td><td>{:.1f}</td>"
        "<td>{:.1f}</td><td>{:.1f}</td><td>{}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.1f} ({:.0f}%)</td>"
        "<td>{:.1f} ({:.0f}%)</td><td>{:.2f}</td></tr>",
        esc(m.mode), m.rt_latency_ms.p50, m.rt_latency_ms.p99, esc(p99_change_text(m, r.stats)), m.rt_latency_ms.max,
        100.0 * m.rt_deadline_miss_rate, m.rt_throughput, m.be_throughput, m.overall_throughput, m.preemptions,
        m.preemption_latency_us.p50, m.preemption_latency_us.p99, m.preemption_staging_us.p50,
        100.0 * m.staging_share_p50, m.preemption_staging_us.p99, 100.0 * m.staging_share_p99, m.longest_be_wait_ms);
  }
  return s + "</table>";
}

}  // namespace

std::string report_html(const BenchResults& r) {
  std::vector<std::string> modes;
  std::vector<std::vector<double>> throughput, misses;
  for (const ModeStats& m : r.stats) {
    modes.push_back(m.mode);
    throughput.push_back({m.rt_throughput, m.be_throughput});
    misses.push_back({m.rt_deadline_miss_rate * 100.0});
  }
  std::string body =
      fmt::format("<h1>DISB workload {}: {}</h1><p>device: {} &middot; commit: {} &middot; RT order: {}</p>",
                  esc(r.workload.name), esc(r.workload.description), esc(r.device), esc(r.commit), esc(r.rt_order));
  body += stats_table(r);
  body += cdf_chart(r);
  body += bar_chart("throughput", "Throughput per mode", "inferences / s", modes, {"RT", "BE"}, throughput);
  body += histogram_chart(r);
  body += bar_chart("deadline-misses", "RT deadline misses per mode", "% of RT requests", modes, {"missed"}, misses);
  // Lets a headless browser confirm the charts were laid out: counts charts with a drawn series.
  const std::string check =
      "<script>document.body.dataset.chartsRendered = [...document.querySelectorAll('svg.chart')]"
      ".filter(s => s.getBBox().width > 0 && s.querySelector('.series, text')).length;</script>";
  return "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>atoll DISB " + esc(r.workload.name) +
         "</title><style>body{font-family:sans-serif;margin:24px}table{border-collapse:collapse}"
         "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}h3{margin-bottom:4px}</style></head><body>" +
         body + check + "</body></html>";
}

}  // namespace atl::bench

#include "bench/host_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace atl::bench {

namespace {

// The numbers after a "cpu" or "cpuN" label: user nice system idle iowait irq softirq steal
// [guest guest_nice]. Guest time is already in user and nice, so only the first eight count.
std::optional<CpuTimes> parse_cpu_fields(std::string_view line) {
  uint64_t fields[8] = {};
  int n = 0;
  while (n < 8) {
    const size_t begin = line.find_first_not_of(' ');
    if (begin == std::string_view::npos) break;
    line = line.substr(begin);
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), fields[n]);
    if (ec != std::errc()) return std::nullopt;
    line = line.substr(static_cast<size_t>(end - line.data()));
    ++n;
  }
  if (n < 4) return std::nullopt;
  CpuTimes t;
  for (int i = 0; i < n; ++i) t.total += fields[i];
  t.busy = t.total - fields[3] - (n > 4 ? fields[4] : 0);
  t.steal = n > 7 ? fields[7] : 0;
  return t;
}

std::string_view line_at(std::string_view text, size_t at) {
  std::string_view line = text.substr(at);
  return line.substr(0, line.find('\n'));
}

}  // namespace

std::optional<CpuTimes> parse_proc_stat(std::string_view text) {
  const size_t at = text.find("cpu ");
  if (at != 0 && (at == std::string_view::npos || text[at - 1] != '\n')) return std::nullopt;
  std::optional<CpuTimes> t = parse_cpu_fields(line_at(text, at + 4));
  if (!t) return std::nullopt;
  // The per-core lines follow the aggregate one, cpu0 upwards.
  for (size_t next = text.find('\n', at); next != std::string_view::npos; next = text.find('\n', next + 1)) {
    const std::string_view line = line_at(text, next + 1);
    if (line.substr(0, 3) != "cpu") break;
    const size_t label_end = line.find(' ');
    const std::optional<CpuTimes> core =
        label_end == std::string_view::npos ? std::nullopt : parse_cpu_fields(line.substr(label_end));
    if (!core) {
      t->core_steal.clear();
      t->core_total.clear();
      break;
    }
    t->core_steal.push_back(core->steal);
    t->core_total.push_back(core->total);
  }
  return t;
}

std::optional<CpuTimes> read_cpu_times() {
  std::ifstream in("/proc/stat");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  std::optional<CpuTimes> t = parse_proc_stat(text.str());
  if (!t) return std::nullopt;
  rusage self{};
  if (getrusage(RUSAGE_SELF, &self) == 0) {
    const auto ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    const double seconds = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
                           static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
    t->self = static_cast<uint64_t>(seconds * ticks);
    t->involuntary_switches = static_cast<uint64_t>(self.ru_nivcsw);
  }
  return t;
}

std::optional<HostLoad> host_load(const std::optional<CpuTimes>& from, const std::optional<CpuTimes>& to) {
  if (!from || !to || to->total <= from->total || to->busy < from->busy) return std::nullopt;
  const auto total = static_cast<double>(to->total - from->total);
  const auto busy = static_cast<double>(to->busy - from->busy);
  const double self = to->self >= from->self ? static_cast<double>(to->self - from->self) : 0.0;
  HostLoad l;
  l.busy = std::clamp(busy / total, 0.0, 1.0);
  l.busy_others = std::clamp((busy - self) / total, 0.0, 1.0);
  const double steal = to->steal >= from->steal ? static_cast<double>(to->steal - from->steal) : 0.0;
  l.steal = std::clamp(steal / total, 0.0, 1.0);
  // Cores are compared only when both readings list the same ones (a CPU brought online between
  // them renumbers nothing, but changes the count).
  if (from->core_total.size() == to->core_total.size()) {
    for (size_t c = 0; c < to->core_total.size(); ++c) {
      if (to->core_total[c] <= from->core_total[c] || to->core_steal[c] < from->core_steal[c]) continue;
      const auto core_steal = static_cast<double>(to->core_steal[c] - from->core_steal[c]);
      const auto core_total = static_cast<double>(to->core_total[c] - from->core_total[c]);
      l.steal_max_core = std::max(l.steal_max_core, std::clamp(core_steal / core_total, 0.0, 1.0));
    }
  }
  if (to->involuntary_switches >= from->involuntary_switches) {
    l.involuntary_switches = to->involuntary_switches - from->involuntary_switches;
  }
  return l;
}

}  // namespace atl::bench

#include "bench/host_load.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace atl::bench {

std::optional<CpuTimes> parse_proc_stat(std::string_view text) {
  const size_t at = text.find("cpu ");
  if (at != 0 && (at == std::string_view::npos || text[at - 1] != '\n')) return std::nullopt;
  std::string_view line = text.substr(at + 4);
  line = line.substr(0, line.find('\n'));
  // user nice system idle iowait irq softirq steal [guest guest_nice]: guest time is already in
  // user and nice, so only the first eight count.
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
  return l;
}

}  // namespace atl::bench

#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json_value.h"
#include "core/rng.h"
#include "core/text.h"
#include "sched/colocate.h"

namespace atl::bench {

const char* load_type_name(LoadType t) {
  switch (t) {
    case LoadType::kPeriodic:
      return "periodic";
    case LoadType::kPoisson:
      return "poisson";
    case LoadType::kClosedLoop:
      return "closed";
    case LoadType::kTrace:
      return "trace";
  }
  return "?";
}

namespace {

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    ATOLL_THROW(kInvalidArgument, "workload '{}': field '{}': {}", source_, field, problem);
  }
  const nlohmann::json& need(const nlohmann::json& j, const std::string& key, const std::string& field) const {
    if (!j.is_object() || !j.contains(key)) fail(field, "is required");
    return j.at(key);
  }
  std::string string(const nlohmann::json& j, const std::string& field) const {
    if (!j.is_string()) fail(field, "must be a string");
    return j.get<std::string>();
  }
  double number(const nlohmann::json& j, const std::string& field) const {
    if (!j.is_number()) fail(field, "must be a number");
    return j.get<double>();
  }
  int64_t integer(const nlohmann::json& j, const std::string& field) const {
    if (!j.is_number_integer()) fail(field, "must be an integer");
    return json_int64(j, field);
  }
  // Rejects a key of `j` outside `known`, naming the closest known key when one is near.
  void only_keys(const nlohmann::json& j, const std::vector<std::string>& known, const std::string& field) const {
    if (!j.is_object()) fail(field.empty() ? "(top level)" : field, "must be an object");
    for (const auto& item : j.items()) {
      if (std::find(known.begin(), known.end(), item.key()) != known.end()) continue;
      const std::string at = field.empty() ? printable(item.key()) : field + "." + printable(item.key());
      const std::string* best = &known.front();
      for (const std::string& k : known) {
        if (edit_distance(item.key(), k) < edit_distance(item.key(), *best)) best = &k;
      }
      const bool near = edit_distance(item.key(), *best) <= std::max<size_t>(2, best->size() / 3);
      fail(at, near ? fmt::format("unknown key (did you mean '{}'?)", *best) : "unknown key");
    }
  }
  // A name that may become a file name and a CSV cell: no path separator, "..", or control character.
  std::string name(const nlohmann::json& j, const std::string& field) const {
    const std::string n = string(j, field);
    if (const auto problem = file_name_problem(n)) fail(field, fmt::format("'{}' {}", printable(n), *problem));
    return n;
  }

 private:
  std::string source_;
};

std::vector<double> read_trace_file(const Reader& r, const std::string& path, const std::string& field) {
  std::ifstream f(path);
  if (!f.good()) r.fail(field, fmt::format("cannot open trace file '{}'", path));
  std::vector<double> out;
  std::string line;
  int line_no = 0;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    double t = 0;
    // One number per line, nothing after it: "10 20" or "5abc" is a broken trace, not 10 or 5.
    if (!(in >> t) || !(in >> std::ws).eof() || !std::isfinite(t) || t < 0) {
      r.fail(field, fmt::format("'{}' line {}: expected one non-negative time in ms, got '{}'", path, line_no,
                                printable(line)));
    }
    if (!out.empty() && t < out.back()) {
      r.fail(field, fmt::format("'{}' line {}: arrival times must not decrease", path, line_no));
    }
    out.push_back(t);
  }
  if (out.empty()) r.fail(field, fmt::format("trace file '{}' holds no arrival", path));
  // The trace repeats with its span as the period: a zero span would repeat forever at time 0
  // (a single arrival at 0 too: its period would be a gap invented from nothing).
  if (!(out.back() > 0))
    r.fail(field, fmt::format("trace file '{}': its arrivals span no time (all at 0 ms), so it cannot repeat", path));
  return out;
}

}  // namespace

Workload parse_workload(const std::string& json_text, const std::string& source_name, const std::string& base_dir) {
  Reader r(source_name);
  const nlohmann::json j = parse_json_document(json_text, fmt::format("workload '{}'", source_name));
  r.only_keys(j, {"name", "description", "clients"}, "");
  Workload w;
  w.name = r.name(r.need(j, "name", "name"), "name");
  if (j.contains("description")) w.description = r.string(j.at("description"), "description");
  const auto& clients = r.need(j, "clients", "clients");
  if (!clients.is_array() || clients.empty()) r.fail("clients", "must be a non-empty array");
  for (size_t i = 0; i < clients.size(); ++i) {
    const auto& cj = clients[i];
    const std::string at = fmt::format("clients[{}]", i);
    r.only_keys(cj, {"name", "model", "batch", "seq", "priority", "load", "deadline_ms"}, at);
    ClientSpec c;
    c.model = r.string(r.need(cj, "model", at + ".model"), at + ".model");
    c.name = cj.contains("name") ? r.name(cj.at("name"), at + ".name") : fmt::format("{}-{}", c.model, i);
    for (const ClientSpec& other : w.clients) {
      if (other.name == c.name) r.fail(at + ".name", fmt::format("'{}' names another client too", printable(c.name)));
    }
    if (cj.contains("batch")) c.batch = r.integer(cj.at("batch"), at + ".batch");
    if (c.batch < 1 || c.batch > 4096) r.fail(at + ".batch", "must be between 1 and 4096");
    if (cj.contains("seq")) c.seq_len = r.integer(cj.at("seq"), at + ".seq");
    if (c.seq_len < 1 || c.seq_len > 512) r.fail(at + ".seq", "must be between 1 and 512");
    const std::string prio = r.string(r.need(cj, "priority", at + ".priority"), at + ".priority");
    if (prio != "rt" && prio != "be")
      r.fail(at + ".priority", fmt::format("'{}' is neither \"rt\" nor \"be\"", printable(prio)));
    c.realtime = prio == "rt";
    const auto& load = r.need(cj, "load", at + ".load");
    r.only_keys(load, {"type", "rate", "concurrency", "file"}, at + ".load");
    const std::string type = r.string(r.need(load, "type", at + ".load.type"), at + ".load.type");
    if (type == "periodic" || type == "poisson") {
      c.load = type == "periodic" ? LoadType::kPeriodic : LoadType::kPoisson;
      c.rate_hz = r.number(r.need(load, "rate", at + ".load.rate"), at + ".load.rate");
      // A rate so small that its period (1000 / rate ms) overflows to infinity would schedule nothing.
      if (!(c.rate_hz > 0 && c.rate_hz <= 100000 && std::isfinite(1000.0 / c.rate_hz)))
        r.fail(at + ".load.rate", "must be in (0, 100000] requests/s, with a finite period");
    } else if (type == "closed") {
      c.load = LoadType::kClosedLoop;
      // Range-checked before narrowing, so 4294967297 is refused rather than read as 1.
      const int64_t concurrency =
          load.contains("concurrency") ? r.integer(load.at("concurrency"), at + ".load.concurrency") : c.concurrency;
      if (concurrency < 1 || concurrency > 64) r.fail(at + ".load.concurrency", "must be between 1 and 64");
      c.concurrency = static_cast<int>(concurrency);
    } else if (type == "trace") {
      c.load = LoadType::kTrace;
      const std::string file = r.string(r.need(load, "file", at + ".load.file"), at + ".load.file");
      const std::filesystem::path p = std::filesystem::path(file).is_absolute()
                                          ? std::filesystem::path(file)
                                          : std::filesystem::path(base_dir) / file;
      c.trace_ms = read_trace_file(r, p.string(), at + ".load.file");
    } else {
      r.fail(at + ".load.type", fmt::format("'{}' is not one of periodic, poisson, closed, trace", printable(type)));
    }
    if (cj.contains("deadline_ms")) {
      const double d = r.number(cj.at("deadline_ms"), at + ".deadline_ms");
      if (!(d > 0)) r.fail(at + ".deadline_ms", "must be positive");
      c.deadline_ms = d;
    } else if (c.realtime && c.load == LoadType::kPeriodic) {
      c.deadline_ms = 1000.0 / c.rate_hz;
    }
    if (c.realtime && c.load == LoadType::kClosedLoop)
      r.fail(at + ".load.type", "an RT client needs an open-loop load");
    w.clients.push_back(std::move(c));
  }
  return w;
}

Workload load_workload(const std::string& path) {
  std::ifstream f(path);
  ATOLL_CHECK(f.good(), kNotFound, "workload file '{}' not found", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_workload(ss.str(), path, std::filesystem::path(path).parent_path().string());
}

namespace {

// A trace shorter than the run repeats, shifted by its span plus one mean gap (a single
// arrival's gap is its time from the start).
double trace_period(const ClientSpec& c) {
  return c.trace_ms.back() + c.trace_ms.back() / static_cast<double>(std::max<size_t>(c.trace_ms.size() - 1, 1));
}

[[noreturn]] void refuse_arrivals(const ClientSpec& c, double duration_ms, double count) {
  ATOLL_THROW(kInvalidArgument,
              "client '{}': {} load over {} s would schedule about {:.3g} requests, more than the limit of {} per "
              "client; shorten the run or lower the rate",
              c.name, load_type_name(c.load), duration_ms / 1000.0, count, sched::kMaxArrivalsPerClient);
}

}  // namespace

double expected_arrivals(const ClientSpec& c, double duration_ms) {
  switch (c.load) {
    case LoadType::kPeriodic:
    case LoadType::kPoisson:
      return duration_ms * c.rate_hz / 1000.0;
    case LoadType::kTrace:
      return std::ceil(duration_ms / trace_period(c)) * static_cast<double>(c.trace_ms.size());
    case LoadType::kClosedLoop:
      break;
  }
  return 0;
}

void check_arrival_count(const ClientSpec& c, double duration_ms) {
  const double count = expected_arrivals(c, duration_ms);
  if (!(count <= static_cast<double>(sched::kMaxArrivalsPerClient))) refuse_arrivals(c, duration_ms, count);
}

ArrivalTimes::ArrivalTimes(const ClientSpec& c, double duration_ms, uint64_t seed)
    : c_(&c), duration_ms_(duration_ms), rng_(seed, c.name) {
  check_arrival_count(c, duration_ms);
}

std::optional<double> ArrivalTimes::next() {
  double t = 0;
  switch (c_->load) {
    case LoadType::kPeriodic:
      t = static_cast<double>(index_++) * (1000.0 / c_->rate_hz);
      break;
    case LoadType::kPoisson:
      t_ += -std::log(1.0 - static_cast<double>(rng_.uniform())) * 1000.0 / c_->rate_hz;
      t = t_;
      // The draws may overshoot the expected count that check_arrival_count bounds.
      if (t < duration_ms_ && drawn_ >= sched::kMaxArrivalsPerClient)
        refuse_arrivals(*c_, duration_ms_, static_cast<double>(drawn_ + 1));
      break;
    case LoadType::kTrace:
      if (index_ == std::ssize(c_->trace_ms)) {  // the trace repeats, shifted by its period
        index_ = 0;
        t_ += trace_period(*c_);
      }
      t = t_ + c_->trace_ms[static_cast<size_t>(index_++)];
      break;
    case LoadType::kClosedLoop:
      return std::nullopt;
  }
  if (!(t < duration_ms_)) return std::nullopt;
  ++drawn_;
  return t;
}

std::vector<double> scheduled_arrivals(const ClientSpec& c, double duration_ms, uint64_t seed) {
  ArrivalTimes times(c, duration_ms, seed);
  std::vector<double> out;
  while (const std::optional<double> t = times.next()) out.push_back(*t);
  return out;
}

}  // namespace atl::bench

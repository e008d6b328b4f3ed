#pragma once
// DISB workloads: clients with a model, a priority class and a load pattern, read from JSON.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "models/zoo.h"

namespace atl::bench {

enum class LoadType { kPeriodic, kPoisson, kClosedLoop, kTrace };
const char* load_type_name(LoadType t);

struct ClientSpec {
  std::string name;
  std::string model;
  int64_t batch = 1;
  int64_t seq_len = ModelOptions{}.seq_len;  // BERT models only ("seq")
  bool realtime = false;
  LoadType load = LoadType::kClosedLoop;
  double rate_hz = 0;                 // periodic / poisson
  int concurrency = 1;                // closed loop: requests kept outstanding
  std::vector<double> trace_ms;       // trace: arrival offsets, ms from start, ascending
  std::optional<double> deadline_ms;  // default for periodic RT clients: the period
};

struct Workload {
  std::string name;
  std::string description;
  std::vector<ClientSpec> clients;
};

// Parses and validates; errors are kParse/kInvalidArgument naming the file, the field
// (e.g. "clients[2].load.rate") and the problem. Trace files are resolved next to `path`.
Workload load_workload(const std::string& path);
Workload parse_workload(const std::string& json_text, const std::string& source_name, const std::string& base_dir);

// Requests an open-loop client schedules in `duration_ms` (Poisson: the expected count); 0 for
// closed-loop clients.
double expected_arrivals(const ClientSpec& c, double duration_ms);

// Refuses (kInvalidArgument naming the client and the limit) an open-loop client that would
// schedule more than sched::kMaxArrivalsPerClient requests in `duration_ms`.
void check_arrival_count(const ClientSpec& c, double duration_ms);

// An open-loop client's scheduled arrival times (ms from start, ascending) within `duration_ms`,
// drawn one at a time so a run never holds its schedule; none for closed-loop clients. Poisson
// draws are seeded so runs repeat; a copy goes on from where it was copied. `c` must outlive it.
class ArrivalTimes {
 public:
  ArrivalTimes(const ClientSpec& c, double duration_ms, uint64_t seed);  // checks the count first
  std::optional<double> next();                                          // nullopt after the last

 private:
  const ClientSpec* c_;
  double duration_ms_;
  Rng rng_;            // Poisson draws
  double t_ = 0;       // Poisson: the last arrival; trace: the current repetition's start
  int64_t index_ = 0;  // periodic: the next arrival's number; trace: its line in the file
  int64_t drawn_ = 0;
};

// Every arrival of ArrivalTimes at once (tests, short schedules).
std::vector<double> scheduled_arrivals(const ClientSpec& c, double duration_ms, uint64_t seed);

}  // namespace atl::bench

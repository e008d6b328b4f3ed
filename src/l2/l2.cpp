#include "l2/l2.h"

#include <nlohmann/json.hpp>

#include "l2/trace.h"

namespace atl::l2 {

void to_json(nlohmann::json& j, const L2Info& info) {
  j = {{"model", info.model},
       {"batch", info.batch},
       {"fingerprint", info.fingerprint},
       {"kernels", info.kernels},
       {"arena_bytes", info.arena_bytes},
       {"slice_bytes", info.slice_bytes},
       {"slices", info.slices},
       {"setaside_max_slices", info.setaside_max_slices},
       {"weight_bytes", info.weight_bytes},
       {"input_bytes", info.input_bytes},
       {"output_bytes", info.output_bytes},
       {"trace_accesses", info.trace_accesses},
       {"device", info.device}};
}

L2Info l2_info(const Program& p, const L2Device& d, int64_t slice_bytes) {
  d.validate();
  L2Info info;
  info.model = p.model;
  info.batch = p.batch;
  info.fingerprint = p.fingerprint;
  info.kernels = static_cast<int>(p.kernels.size());
  info.arena_bytes = p.arena_bytes;
  info.slice_bytes = slice_bytes;
  info.slices = slice_count(p.arena_bytes, slice_bytes);
  info.setaside_max_slices = d.setaside_max_bytes / slice_bytes;
  for (int64_t bytes : device_weight_bytes(p)) info.weight_bytes += bytes;
  const Trace t = build_trace(p, d.line_bytes);
  for (const TraceRegion& r : t.regions) {
    if (r.kind == Binding::Kind::kInput) info.input_bytes += r.bytes;
    if (r.kind == Binding::Kind::kOutput) info.output_bytes += r.bytes;
  }
  info.trace_accesses = t.accesses();
  info.device = d;
  return info;
}

SimResult simulate(const Program& p, const L2Device& d, Policy policy, const ResidencyConfig* config,
                   const SimOptions& options) {
  d.validate();
  Trace t = build_trace(p, d.line_bytes);
  if (config) t = hinted_trace(t, p, *config, d, options.hints);
  CacheSimulator sim(CacheGeometry::of(d, config ? config->setaside_bytes : 0));
  SimResult r = sim.run(t, policy, config ? config->hit_ratio : 0.0, options);
  r.model = p.model;
  r.batch = p.batch;
  r.device = d.name;
  r.hints = config ? hint_mode_name(options.hints) : "none";
  for (size_t k = 0; k < r.kernels.size(); ++k) r.kernels[k].name = p.kernels[k].name;
  return r;
}

}  // namespace atl::l2

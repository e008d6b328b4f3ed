#include "program/program.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_value.h"
#include "core/rng.h"

namespace atl {

const char* layout_name(Layout l) { return l == Layout::kNHWC ? "nhwc" : "row_major"; }

const char* binding_kind_name(Binding::Kind k) {
  switch (k) {
    case Binding::Kind::kArena: return "arena";
    case Binding::Kind::kWeight: return "weight";
    case Binding::Kind::kInput: return "input";
    case Binding::Kind::kOutput: return "output";
  }
  return "?";
}

namespace {

Layout layout_from(const std::string& s) {
  if (s == "nhwc") return Layout::kNHWC;
  ATOLL_CHECK(s == "row_major", kParse, "unknown layout '{}'", s);
  return Layout::kRowMajor;
}

Binding::Kind kind_from(const std::string& s) {
  for (auto k : {Binding::Kind::kArena, Binding::Kind::kWeight, Binding::Kind::kInput, Binding::Kind::kOutput}) {
    if (s == binding_kind_name(k)) return k;
  }
  ATOLL_THROW(kParse, "unknown binding kind '{}'", s);
}

nlohmann::json spec_json(const TensorSpec& s) {
  return {{"name", s.name}, {"dtype", dtype_name(s.dtype)}, {"shape", s.shape.dims()}, {"layout", layout_name(s.layout)}};
}

TensorSpec spec_from(const nlohmann::json& j) {
  TensorSpec s;
  s.name = j.at("name").get<std::string>();
  s.dtype = dtype_from_name(j.at("dtype").get<std::string>());
  s.shape = Shape(json_int64_list(j.at("shape"), "shape"));
  s.layout = layout_from(j.at("layout").get<std::string>());
  return s;
}

nlohmann::json binding_json(const Binding& b) {
  return {{"kind", binding_kind_name(b.kind)}, {"index", b.index},   {"offset", b.offset},
          {"bytes", b.bytes},                  {"dtype", dtype_name(b.dtype)}, {"shape", b.shape.dims()},
          {"layout", layout_name(b.layout)},   {"buffer", b.buffer}};
}

Binding binding_from(const nlohmann::json& j) {
  Binding b;
  b.kind = kind_from(j.at("kind").get<std::string>());
  b.index = json_int(j.at("index"), "index");
  b.offset = json_int64(j.at("offset"), "offset");
  b.bytes = json_int64(j.at("bytes"), "bytes");
  b.dtype = dtype_from_name(j.at("dtype").get<std::string>());
  b.shape = Shape(json_int64_list(j.at("shape"), "shape"));
  b.layout = layout_from(j.at("layout").get<std::string>());
  b.buffer = json_int(j.at("buffer"), "buffer");
  return b;
}

nlohmann::json contents_json(const Program& p) {
  nlohmann::json j;
  j["model"] = p.model;
  j["batch"] = p.batch;
  j["act_dtype"] = dtype_name(p.act_dtype);
  j["arena_bytes"] = p.arena_bytes;
  j["naive_activation_bytes"] = p.naive_activation_bytes;
  j["alignment"] = p.alignment;
  j["inflight_window"] = p.inflight_window;
  for (const auto* list : {&p.inputs, &p.outputs, &p.weights}) {
    auto arr = nlohmann::json::array();
    for (const auto& s : *list) arr.push_back(spec_json(s));
    j[list == &p.inputs ? "inputs" : list == &p.outputs ? "outputs" : "weights"] = std::move(arr);
  }
  auto kernels = nlohmann::json::array();
  for (const Kernel& k : p.kernels) {
    nlohmann::json kj;
    kj["name"] = k.name;
    kj["op"] = std::string(op_name(k.op));
    kj["attrs"] = k.attrs;
    kj["flops"] = k.flops;
    kj["bytes_moved"] = k.bytes_moved;
    for (const auto* list : {&k.inputs, &k.outputs}) {
      auto arr = nlohmann::json::array();
      for (const auto& b : *list) arr.push_back(binding_json(b));
      kj[list == &k.inputs ? "inputs" : "outputs"] = std::move(arr);
    }
    kernels.push_back(std::move(kj));
  }
  j["kernels"] = std::move(kernels);
  return j;
}

}  // namespace

int64_t Program::param_count() const {
  int64_t n = 0;
  for (const auto& w : weights) n += w.shape.numel();
  return n;
}

double Program::total_flops() const {
  double f = 0;
  for (const auto& k : kernels) f += k.flops;
  return f;
}

std::string Program::compute_fingerprint() const {
  return fmt::format("{:016x}", fnv1a64(contents_json(*this).dump()));
}

void to_json(nlohmann::json& j, const Program& p) {
  j = contents_json(p);
  j["format"] = "atoll.program/1";
  j["fingerprint"] = p.fingerprint;
}

void from_json(const nlohmann::json& j, Program& p) {
  p.model = j.at("model").get<std::string>();
  p.batch = json_int64(j.at("batch"), "batch");
  p.act_dtype = dtype_from_name(j.at("act_dtype").get<std::string>());
  p.arena_bytes = json_int64(j.at("arena_bytes"), "arena_bytes");
  p.naive_activation_bytes = json_int64(j.at("naive_activation_bytes"), "naive_activation_bytes");
  p.alignment = json_int64(j.at("alignment"), "alignment");
  p.inflight_window = json_int(j.at("inflight_window"), "inflight_window");
  p.inputs.clear();
  p.outputs.clear();
  p.weights.clear();
  for (const auto& s : j.at("inputs")) p.inputs.push_back(spec_from(s));
  for (const auto& s : j.at("outputs")) p.outputs.push_back(spec_from(s));
  for (const auto& s : j.at("weights")) p.weights.push_back(spec_from(s));
  p.kernels.clear();
  for (const auto& kj : j.at("kernels")) {
    Kernel k;
    k.name = kj.at("name").get<std::string>();
    k.op = op_from_name(kj.at("op").get<std::string>());
    k.attrs = kj.at("attrs").get<Attrs>();
    k.flops = kj.at("flops").get<double>();
    k.bytes_moved = kj.at("bytes_moved").get<double>();
    for (const auto& b : kj.at("inputs")) k.inputs.push_back(binding_from(b));
    for (const auto& b : kj.at("outputs")) k.outputs.push_back(binding_from(b));
    p.kernels.push_back(std::move(k));
  }
  p.fingerprint = j.at("fingerprint").get<std::string>();
}

std::string program_to_json_string(const Program& p, int indent) {
  nlohmann::json j = p;
  return j.dump(indent);
}

Program program_from_json_string(const std::string& text) {
  Program p;
  try {
    const nlohmann::json j = parse_json_document(text, "program JSON");
    ATOLL_CHECK(j.value("format", "") == "atoll.program/1", kParse, "not an atoll program (format '{}')",
                j.value("format", ""));
    p = j.get<Program>();
  } catch (const nlohmann::json::exception& e) {
    ATOLL_THROW(kParse, "program JSON: {}", json_error_text(e));
  }
  ATOLL_CHECK(p.fingerprint == p.compute_fingerprint(), kParse,
              "program fingerprint {} does not match its contents ({}): the file was edited or is corrupt",
              p.fingerprint, p.compute_fingerprint());
  verify_program(p);
  return p;
}

void verify_program(const Program& p) {
  auto check_binding = [&](const Kernel& k, const Binding& b) {
    const int64_t need = b.shape.numel() * static_cast<int64_t>(dtype_size(b.dtype));
    ATOLL_CHECK(b.bytes == need, kInternal, "kernel '{}': binding of {} covers {} bytes, shape {} needs {}", k.name,
                binding_kind_name(b.kind), b.bytes, b.shape.str(), need);
    switch (b.kind) {
      case Binding::Kind::kArena:
        ATOLL_CHECK(b.offset >= 0 && b.offset + b.bytes <= p.arena_bytes, kInternal,
                    "kernel '{}': arena binding [{}, {}) outside arena of {} bytes", k.name, b.offset,
                    b.offset + b.bytes, p.arena_bytes);
        break;
      case Binding::Kind::kWeight:
      case Binding::Kind::kInput:
      case Binding::Kind::kOutput: {
        const auto& list = b.kind == Binding::Kind::kWeight  ? p.weights
                           : b.kind == Binding::Kind::kInput ? p.inputs
                                                             : p.outputs;
        ATOLL_CHECK(b.index >= 0 && b.index < static_cast<int>(list.size()), kInternal,
                    "kernel '{}': {} index {} out of range", k.name, binding_kind_name(b.kind), b.index);
        const TensorSpec& s = list[static_cast<size_t>(b.index)];
        const int64_t cap = s.shape.numel() * static_cast<int64_t>(dtype_size(s.dtype));
        ATOLL_CHECK(b.offset >= 0 && b.offset + b.bytes <= cap, kInternal,
                    "kernel '{}': binding exceeds {} '{}'", k.name, binding_kind_name(b.kind), s.name);
        break;
      }
    }
  };
  auto overlaps = [](const Binding& a, const Binding& b) {
    if (a.kind != b.kind || a.index != b.index) return false;
    return a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
  };
  for (const Kernel& k : p.kernels) {
    for (const auto& b : k.inputs) check_binding(k, b);
    for (const auto& b : k.outputs) {
      check_binding(k, b);
      ATOLL_CHECK(b.kind == Binding::Kind::kArena || b.kind == Binding::Kind::kOutput, kInternal,
                  "kernel '{}' writes a {}", k.name, binding_kind_name(b.kind));
      for (const auto& i : k.inputs) {
        ATOLL_CHECK(!overlaps(b, i), kInternal, "kernel '{}' reads memory it writes: not idempotent", k.name);
      }
    }
  }
}

}  // namespace atl

#pragma once
// Flags shared by the subcommands that take a model.
#include <CLI/CLI.hpp>
#include <string>

#include "models/zoo.h"

namespace atl::apps {

struct ModelFlags {
  std::string model;
  ModelOptions options;
};

inline void add_model_flags(CLI::App* cmd, ModelFlags& f) {
  cmd->add_option("model", f.model, "Model name (see `atoll models`)")->default_str(default_model());
  cmd->add_option("--batch", f.options.batch, "Batch size")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--seq", f.options.seq_len, "Sequence length for BERT models")->check(CLI::Range(int64_t{1}, int64_t{512}));
  cmd->add_option("--seed", f.options.seed, "Seed for weights and inputs");
}

inline std::string model_or_default(const ModelFlags& f) { return f.model.empty() ? default_model() : f.model; }

}  // namespace atl::apps

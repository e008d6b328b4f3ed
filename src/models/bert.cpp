// HuggingFace BertModel and DistilBertModel encoders (inference form, no attention mask).
// Weight names are the models' own state_dict keys (BertModel without the "bert." prefix).
#include <cmath>

#include "core/error.h"
#include "models/builder.h"

namespace atl::models {

namespace {

// Module paths of one encoder layer, relative to the layer.
struct LayerModules {
  const char* query;
  const char* key;
  const char* value;
  const char* attention_out;
  const char* attention_norm;
  const char* ffn_in;
  const char* ffn_out;
  const char* output_norm;
};

constexpr LayerModules kBertModules{
    "attention.self.query",       "attention.self.key", "attention.self.value", "attention.output.dense",
    "attention.output.LayerNorm", "intermediate.dense", "output.dense",         "output.LayerNorm"};
constexpr LayerModules kDistilModules{"attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
                                      "sa_layer_norm",   "ffn.lin1",        "ffn.lin2",        "output_layer_norm"};

struct Dims {
  int64_t batch, seq, hidden, heads;
  int64_t head_dim() const { return hidden / heads; }
};

// [B, S, H] -> [B, heads, S, head_dim]
ValueId split_heads(Builder& b, ValueId x, const std::string& module, const Dims& d) {
  x = b.reshape(x, module + ".split_heads", {d.batch, d.seq, d.heads, d.head_dim()});
  return b.transpose(x, module + ".heads_first", {0, 2, 1, 3});
}

ValueId encoder_layer(Builder& b, ValueId x, const std::string& layer, const LayerModules& m, const BertConfig& cfg,
                      const Dims& d, const std::string& output_node) {
  const auto path = [&](const char* module) { return layer + "." + module; };
  const auto project = [&](const char* module) {
    return split_heads(b, b.linear(x, path(module), d.hidden, LinearInit::kBert), path(module), d);
  };
  const ValueId q = project(m.query);
  const ValueId k = project(m.key);
  const ValueId v = project(m.value);
  const std::string attention = layer + ".attention";
  const double scale = 1.0 / std::sqrt(static_cast<double>(d.head_dim()));
  const ValueId scores = b.matmul(q, k, attention + ".scores", /*trans_b=*/true, scale);
  const ValueId probs = b.softmax(scores, attention + ".probs");
  ValueId context = b.matmul(probs, v, attention + ".context", /*trans_b=*/false, 1.0);
  context = b.transpose(context, attention + ".seq_first", {0, 2, 1, 3});
  context = b.reshape(context, attention + ".merge_heads", {d.batch, d.seq, d.hidden});

  ValueId attn = b.linear(context, path(m.attention_out), d.hidden, LinearInit::kBert);
  attn = b.dropout(attn, path(m.attention_out) + ".dropout");
  attn = b.layer_norm(b.add(attn, x, attention + ".residual"), path(m.attention_norm), cfg.ln_epsilon);

  ValueId ffn = b.linear(attn, path(m.ffn_in), cfg.ffn, LinearInit::kBert);
  ffn = b.gelu(ffn, path(m.ffn_in) + ".gelu");
  ffn = b.dropout(b.linear(ffn, path(m.ffn_out), d.hidden, LinearInit::kBert), path(m.ffn_out) + ".dropout");
  return b.layer_norm(b.add(ffn, attn, layer + ".residual"), path(m.output_norm), cfg.ln_epsilon, output_node);
}

}  // namespace

Graph build_bert(const BertConfig& cfg, int64_t batch, int64_t seq_len) {
  ATOLL_CHECK(seq_len >= 1 && seq_len <= cfg.max_positions, kInvalidArgument,
              "sequence length {} outside 1..{} (the model's position table)", seq_len, cfg.max_positions);
  const Dims d{batch, seq_len, cfg.hidden, cfg.heads};
  Graph g;
  Builder b(g);
  const ValueId ids = b.input("input_ids", DType::kI64, Shape{batch, seq_len});
  ValueId x = b.gather(b.embedding_table("embeddings.word_embeddings", cfg.vocab, cfg.hidden), ids,
                       "embeddings.word_embeddings");
  if (!cfg.distil) {
    const ValueId types = b.input("token_type_ids", DType::kI64, Shape{batch, seq_len});
    const ValueId type_emb = b.gather(b.embedding_table("embeddings.token_type_embeddings", cfg.type_vocab, cfg.hidden),
                                      types, "embeddings.token_type_embeddings");
    x = b.add(x, type_emb, "embeddings.add_token_types");
  }
  // Positions are 0..S-1 for every sequence: a slice of the table, broadcast over the batch.
  const ValueId positions = b.slice(b.embedding_table("embeddings.position_embeddings", cfg.max_positions, cfg.hidden),
                                    "embeddings.position_embeddings", {0}, {0}, {seq_len});
  x = b.add(x, positions, "embeddings.add_positions");
  x = b.dropout(b.layer_norm(x, "embeddings.LayerNorm", cfg.ln_epsilon), "embeddings.dropout");

  const LayerModules& modules = cfg.distil ? kDistilModules : kBertModules;
  const std::string layer_prefix = cfg.distil ? "transformer.layer" : "encoder.layer";
  for (int64_t i = 0; i < cfg.layers; ++i) {
    const std::string output_node = i + 1 == cfg.layers ? "last_hidden_state" : "";
    x = encoder_layer(b, x, fmt::format("{}.{}", layer_prefix, i), modules, cfg, d, output_node);
  }
  b.output(x);
  if (!cfg.distil) {
    ValueId first = b.slice(x, "pooler.first_token", {1}, {0}, {1});
    first = b.reshape(first, "pooler.squeeze", {batch, cfg.hidden});
    b.output(b.tanh(b.linear(first, "pooler.dense", cfg.hidden, LinearInit::kBert), "pooler_output"));
  }
  return g;
}

Graph build_bert_base(const ModelOptions& opts) {
  return build_bert(BertConfig{}, opts.batch, opts.seq_len);
}

Graph build_distilbert(const ModelOptions& opts) {
  BertConfig cfg;
  cfg.distil = true;
  cfg.layers = 6;
  return build_bert(cfg, opts.batch, opts.seq_len);
}

}  // namespace atl::models

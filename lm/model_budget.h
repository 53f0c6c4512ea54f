// model_budget.h — what building a TransformerLM of a config allocates, from the config alone, and the
// check every model loader makes before it builds one from a file (issue 35): a small file must not be
// able to ask for a huge allocation.
//
// A file's tensors justify the model's weights, but the RoPE tables (nn/rope.h: float64 cos/sin built at
// construction, then kept in the model's dtype, [context_length, head size / 2] each) and the KV cache that
// generate allocates at its default size (nn/kv_cache.h: K and V of [1, n_kv_heads, context_length, head
// size] per layer) grow with context_length and the head size alone, and a config read before its tensors
// are checked can ask for any weights. So every loader (read_int8_model, model_from_checkpoint,
// read_llama2c_model, import_hf_llama, `train --init-from/--resume`) refuses, before the model exists, a
// config whose weights, or whose RoPE tables + KV cache, take more than the weights the file holds (its
// values counted in the config's dtype) plus model_allocation_slack() (1 GiB) — with one line naming the field and
// the figure:
//   int8 model 'm.safetensors': context_length 16777216 (head size 512) asks for 160 GiB of RoPE tables and
//   KV cache, more than the 6.00 KiB of weights in the file plus 1.00 GiB (lm/model_budget.h)
// So a model built from a file of W bytes of weights allocates at most about 2·W + 2 GiB at load and
// generation. A real model's tables and cache are a fraction of its weights (Llama-2-7B's 4096-position
// KV cache in float32: 4 GiB beside 27 GiB of weights) or, for a small model, far below the slack.
//   lm::check_model_allocation(config, double(values_in_file), fmt::format("int8 model '{}'", path));
#pragma once
#include <cstdint>
#include <string>

#include "nn/transformer_lm.h"

namespace tapegrad::lm {

// What a file's config may allocate beyond the weights the file holds: 1 GiB by default. A real model's
// RoPE tables and KV cache are a fraction of its weights, or (a small model with a long context) well
// within this; a damaged or hostile config's are not. Process-wide; the fuzz targets lower it
// (tests/fuzz/model_bound.h) so that every model they build stays small.
inline constexpr double kModelAllocationSlack = double(uint64_t(1) << 30);
double model_allocation_slack();
void set_model_allocation_slack(double bytes);

// Bytes, in double so that no config can overflow the arithmetic; a field ≤ 0 counts as 0 (the
// TransformerLM constructor refuses such configs), n_kv_heads and d_ff ≤ 0 take their defaults.
struct ModelAllocation {
  double embeddings = 0;  // the token embedding table, and the classifier when not tied
  double blocks = 0;      // every layer's weights, and the norms outside them (final, embed_norm)
  double rope = 0;        // the RoPE tables: float64 while being built, then in the model's dtype; position ids
  double kv_cache = 0;    // generate's KV cache for one sequence of context_length
  double total() const { return embeddings + blocks + rope + kv_cache; }
};
ModelAllocation model_allocation(const nn::TransformerLMConfig& config);

// Throws tapegrad::Error "<what>: <field> <value> (…) asks for <bytes> of …, more than …" when the weights or
// the RoPE tables + KV cache of model_allocation(config) exceed file_values (the number of weight values the
// file holds, int8 or float) × the config's element size + model_allocation_slack().
// `context_field`: the file's name for context_length ("seq_len" in llama2.c, "max_position_embeddings" in HF).
void check_model_allocation(const nn::TransformerLMConfig& config, double file_values, const std::string& what,
                            const char* context_field = "context_length");

// "3.20 KiB", "1.00 GiB", "8.0e+12 GiB" (binary units; any double).
std::string format_binary_bytes(double bytes);

}  // namespace tapegrad::lm

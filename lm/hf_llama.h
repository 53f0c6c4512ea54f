// hf_llama.h — Hugging Face Llama checkpoints (LlamaForCausalLM: config.json + model.safetensors, or
// on import a sharded model.safetensors.index.json + its shards), both ways, for `tapegrad export hf`
// and `tapegrad import hf`.
//
//   lm::export_hf_llama(model, "out/hf");              // out/hf/config.json, out/hf/model.safetensors
//   lm::HfLlama m = lm::import_hf_llama("out/hf");     // or a directory of shards + index
//   nn::TransformerLM lm(m.config);
//   lm.load_state_dict(m.weights);                      // strict: every name present
//
// Names: the table in nn/transformer_lm.h. RoPE: Hugging Face rotates "half" pairs (k, k + D/2) of each
// head vector (transformers' rotate_half: x1 = x[..., :D/2], x2 = x[..., D/2:];
// q·cos + rotate_half(q)·sin gives out[k] = q[k]cos_k − q[k+D/2]sin_k, out[k+D/2] = q[k+D/2]cos_k + q[k]sin_k,
// with cos/sin = cat(freqs, freqs), freqs_k = pos·θ^(−2k/D)); we rotate the interleaved pairs (2k, 2k+1)
// with the same angle (nn/rope.h: y[2k] = x[2k]cos_k − x[2k+1]sin_k, y[2k+1] = x[2k]sin_k + x[2k+1]cos_k).
// So our dim 2k is HF dim k and our dim 2k+1 is HF dim k + D/2, and the q_proj / k_proj rows are
// permuted per head of D rows on export:
//   HF row h·D + k       = our row h·D + 2k       (k < D/2)
//   HF row h·D + k + D/2 = our row h·D + 2k + 1
// and inversely on import. Rotating the permuted vector the HF way gives the permutation of our
// rotated vector, and q·k is the same sum in another order: the attention scores are equal.
// v_proj, o_proj and everything else are copied as they are.
//
// Export writes dtype float32 (or float64 for a float64 model), atomically, as one model.safetensors.
// Import reads model.safetensors when it exists, else a sharded checkpoint — as transformers'
// from_pretrained picks between them (the single file wins when both are there; weights_source says
// which was read): model.safetensors.index.json = {"metadata": {...}, "weight_map": {tensor: shard file}}.
// Every shard the map names is read once; each shard name must be a plain file name in DIR (no path
// separator, no ".."), each shard must exist, every tensor must be in exactly the shard the map names,
// and every tensor of a shard must be in the map (so none is duplicated); "metadata" is not used.
// Import requires model_type "llama", hidden_act "silu", no attention/MLP biases, rope_scaling absent or null, an
// optional head_dim equal to hidden_size / num_attention_heads, every tensor present with its shape and
// no other tensor (except rotary_emb.inv_freq buffers of old checkpoints, which are ignored). Tensors
// may be F32 or F64; F16 and BF16 are widened to float32 exactly (every half/bfloat16 is a float32): the float32 master weights.
// Every problem is a tapegrad::Error naming the file and the key or tensor.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

// Writes dir/config.json and dir/model.safetensors (creating dir).
// weights: the dtype written to model.safetensors and config.json's torch_dtype — the model's own (float32 or
// float64), or bfloat16 (every weight rounded to nearest even: half the bytes, what most Hugging Face
// checkpoints ship).
void export_hf_llama(const nn::TransformerLM& model, const std::string& dir, std::optional<DType> weights = {});

struct HfLlama {
  nn::TransformerLMConfig config;          // n_kv_heads and d_ff explicit; dtype float32 or float64
  std::map<std::string, Tensor> weights;   // under TransformerLM's parameter names, q/k rows in our layout
  std::vector<std::string> weight_files;   // the safetensors files read: model.safetensors or the shards
  std::string weights_source;              // for people: the file or the index (+ shard count) read
};

HfLlama import_hf_llama(const std::string& dir);

}  // namespace tapegrad::lm

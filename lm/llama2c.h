// llama2c.h — Karpathy's llama2.c model files (export.py's .bin: float32 legacy "version 0" as run.c
// reads it, the float32 "ak42" version 1, and the int8 Q8_0 version 2 that runq.c reads) in our
// TransformerLM config and parameter names (nn/transformer_lm.h), for `tapegrad import llama2c`.
// Writing them is lm/llama2c_export.h.
//
//   lm::Llama2cModel m = lm::read_llama2c_model("stories260K.bin");
//   auto model = lm::make_llama2c_model(std::move(m));   // float or int8 weights, as the file holds them
//
// Files are little-endian; the version is told by the first 4 bytes (the "ak42" magic or not).
// Version 0 (export.py --version 0, legacy_export): 7 int32 dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size (negative: a separate classifier follows), seq_len; then float32
// token_embedding [V, C], rms_att [L, C], wq [L, C, C], wk [L, KV, C], wv [L, KV, C], wo [L, C, C],
// rms_ffn [L, C], w1 [L, F, C], w2 [L, C, F], w3 [L, F, C], rms_final [C], freq_cis_real [T, D/2],
// freq_cis_imag [T, D/2], [wcls [V, C]] (KV = n_kv_heads · D, D = C / n_heads).
// Version 1 (export.py --version 1, version1_export): a 256-byte header — uint32 magic 0x616b3432
// ("ak42"), int32 version 1, the same 7 int32 (offset 8; vocab_size positive), uint8 shared_classifier
// (offset 36: 1 = the classifier is the embedding), zeros to offset 256 — then float32 rms_att [L, C],
// rms_ffn [L, C], rms_final [C], token_embedding [V, C], wq, wk, wv, wo, w1, w2, w3 (each [L, …] as
// above), [wcls [V, C]] when not shared; no freq_cis tables.
// Version 2 (export.py --version 2, version2_export; runq.c): the version-1 header with version 2 and an
// int32 group_size GS at offset 37 (unaligned), zeros to 256; float32 rms_att, rms_ffn, rms_final; then
// each matrix as its int8 values (numel bytes) directly followed by its float32 scales (numel / GS), the
// groups taken over the flattened matrix: token_embedding, wq of each layer, then wk, wv, wo, w1, w2, w3
// of each layer, [wcls]. A value is q · scale (Q8_0, kernels/int8.h). GS must divide dim and hidden_dim
// (every row length), so that the groups are our per-row groups and runq.c's activation groups fit.
// In all three the matrices are W[out][in], as our Linear weights, exactly as llama2.c's model.py holds
// them (export.py converts Meta and Hugging Face checkpoints to that layout before writing):
// run.c's and model.py's RoPE rotate the interleaved pairs (2k, 2k+1) of each head by pos · 10000^(−2k/D),
// our convention, so no row permutation is needed; the RMSNorm eps is 1e-5. The v0 freq_cis tables are
// not used (our RoPE recomputes them) but are returned for checking.
//
// Everything is validated before a weight is read: positive sizes under sane bounds, n_heads dividing
// dim, n_kv_heads dividing n_heads, an even head size, for v1/v2 the version, a shared_classifier of 0
// or 1 and zero padding, for v2 a group_size that divides dim and hidden_dim, and a file size exactly
// what the header implies; while reading v2, int8 values of −128 (never written: our kernels assume
// [−127, 127]) and non-finite or negative scales are refused. Otherwise a tapegrad::Error names the file
// and the field, tensor or offset at fault.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "autograd/tensor.h"
#include "kernels/int8.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

struct Llama2cModel {
  int version = 0;                     // 0 (legacy), 1 ("ak42" float32) or 2 ("ak42" int8 Q8_0)
  nn::TransformerLMConfig config;      // rope_theta 10000, eps 1e-5, tie_embeddings = shared classifier
  // float32, under TransformerLM's parameter names: every parameter (v0, v1) or the RMSNorm weights (v2)
  std::map<std::string, Tensor> weights;
  // v2: the matrices under TransformerLM's parameter names ("layers.0.attn.q_proj.weight",
  // "token_embeddings.weight", "lm_head.weight"), [out, in] in groups of group_size along in
  std::map<std::string, kernels::Int8Matrix> int8_weights;
  int64_t group_size = 0;                 // v2: GS; 0 for v0 and v1
  Tensor freq_cis_real, freq_cis_imag;    // v0: [seq_len, head_size/2] as stored (cos / sin); else undefined
};

Llama2cModel read_llama2c_model(const std::string& path);

// The TransformerLM of a file read above: float parameters loaded strictly (v0, v1), or (v2) the int8
// weights installed (set_int8_weight) and the norms loaded strictly; parameters are not initialised first.
std::unique_ptr<nn::TransformerLM> make_llama2c_model(Llama2cModel m);

}  // namespace tapegrad::lm

// llama2c.h — Karpathy's llama2.c model files (export.py's float32 .bin, legacy "version 0" as run.c
// reads it, and the "ak42" version 1) read into our TransformerLM config and parameter names
// (nn/transformer_lm.h), for `tapegrad import llama2c`.
//
//   lm::Llama2cModel m = lm::read_llama2c_model("stories260K.bin");
//   nn::TransformerLM lm(m.config);
//   lm.load_state_dict(m.weights);   // strict: every name present
//
// Files are little-endian; the version is told by the first 4 bytes (the v1 magic or not).
// Version 0 (export.py --version 0, legacy_export): 7 int32 dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size (negative: a separate classifier follows), seq_len; then float32
// token_embedding [V, C], rms_att [L, C], wq [L, C, C], wk [L, KV, C], wv [L, KV, C], wo [L, C, C],
// rms_ffn [L, C], w1 [L, F, C], w2 [L, C, F], w3 [L, F, C], rms_final [C], freq_cis_real [T, D/2],
// freq_cis_imag [T, D/2], [wcls [V, C]] (KV = n_kv_heads · D, D = C / n_heads).
// Version 1 (export.py --version 1, version1_export): a 256-byte header — uint32 magic 0x616b3432
// ("ak42"), int32 version 1, the same 7 int32 (offset 8; vocab_size positive), uint8 shared_classifier
// (offset 36: 1 = the classifier is the embedding), zeros to offset 256 — then float32 rms_att [L, C],
// rms_ffn [L, C], rms_final [C], token_embedding [V, C], wq, wk, wv, wo, w1, w2, w3 (each [L, …] as
// above), [wcls [V, C]] when not shared; no freq_cis tables. Version 2 (int8 Q8_0) is refused.
// In both the matrices are W[out][in], as our Linear weights, exactly as llama2.c's model.py holds them
// (export.py converts Meta and Hugging Face checkpoints to that layout before writing either version):
// run.c's and model.py's RoPE rotate the interleaved pairs (2k, 2k+1) of each head by pos · 10000^(−2k/D),
// our convention, so no row permutation is needed; the RMSNorm eps is 1e-5. The v0 freq_cis tables are
// not used (our RoPE recomputes them) but are returned for checking.
//
// Everything is validated before a float is read: positive sizes under sane bounds, n_heads dividing
// dim, n_kv_heads dividing n_heads, an even head size, for v1 the version, a shared_classifier of 0 or
// 1 and zero padding, and a file size exactly what the header implies; otherwise a tapegrad::Error
// naming the file and the field or offset at fault.
#pragma once
#include <map>
#include <string>

#include "autograd/tensor.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

struct Llama2cModel {
  int version = 0;                     // 0 (legacy) or 1 ("ak42")
  nn::TransformerLMConfig config;      // rope_theta 10000, eps 1e-5, tie_embeddings = shared classifier
  std::map<std::string, Tensor> weights;  // float32, under TransformerLM's parameter names
  Tensor freq_cis_real, freq_cis_imag;    // v0: [seq_len, head_size/2] as stored (cos / sin); v1: undefined
};

Llama2cModel read_llama2c_model(const std::string& path);

}  // namespace tapegrad::lm

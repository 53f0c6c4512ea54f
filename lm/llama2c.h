// llama2c.h — Karpathy's llama2.c model files (run.c's legacy "version 0" .bin) read into our
// TransformerLM config and parameter names (nn/transformer_lm.h), for `tapegrad import llama2c`.
//
//   lm::Llama2cModel m = lm::read_llama2c_model("stories260K.bin");
//   nn::TransformerLM lm(m.config);
//   lm.load_state_dict(m.weights);   // strict: every name present
//
// File (little-endian): 7 int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative:
// a separate classifier follows), seq_len; then float32 token_embedding [V, C], rms_att [L, C],
// wq [L, C, C], wk [L, KV, C], wv [L, KV, C], wo [L, C, C], rms_ffn [L, C], w1 [L, F, C], w2 [L, C, F],
// w3 [L, F, C], rms_final [C], freq_cis_real [T, D/2], freq_cis_imag [T, D/2], [wcls [V, C]]
// (KV = n_kv_heads · D, D = C / n_heads). The matrices are W[out][in], as our Linear weights; run.c's
// RoPE rotates the interleaved pairs (2k, 2k+1) of each head by pos · 10000^(−2k/D), our convention, so
// no row permutation is needed; its RMSNorm eps is 1e-5. The freq_cis tables are not used (our RoPE
// recomputes them) but are returned for checking.
//
// Everything is validated before a float is read: positive sizes under sane bounds, n_heads dividing
// dim, n_kv_heads dividing n_heads, an even head size, and a file size exactly what the header implies;
// otherwise a tapegrad::Error naming the file and the field or offset at fault. The "ak42" version-1
// header (export.py --version 1) is recognised and refused as not supported yet.
#pragma once
#include <map>
#include <string>

#include "autograd/tensor.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

struct Llama2cModel {
  nn::TransformerLMConfig config;      // rope_theta 10000, eps 1e-5, tie_embeddings = shared classifier
  std::map<std::string, Tensor> weights;  // float32, under TransformerLM's parameter names
  Tensor freq_cis_real, freq_cis_imag;    // [seq_len, head_size/2] as stored (cos / sin tables)
};

Llama2cModel read_llama2c_model(const std::string& path);

}  // namespace tapegrad::lm

// llama2c_layout.h — internal to lm/: the arrays of llama2.c's model files — run.c's name, our parameter
// name, the shape — in the order each version stores them. One table for the reader (llama2c.cpp) and
// the writer (llama2c_export.cpp), so the two cannot drift apart.
//   v0 (export.py's legacy_export, run.c's input): the embedding, each kind of weight across the layers,
//      the RoPE tables freq_cis_real/imag, [the classifier].
//   v1, v2 (version1_export, version2_export): the norms first, then the embedding and the matrices,
//      no RoPE tables, [the classifier]. (v2 stores every matrix as int8 values + float32 scales.)
// All hold wq/wk as llama2.c's model.py does (interleaved RoPE pairs, our layout): no row permutation.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace tapegrad::lm {

struct Llama2cSizes {
  int64_t dim = 0, hidden = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab = 0, seq = 0;
  bool shared = false;  // the classifier is the embedding (no wcls array)
};

struct Llama2cArray {
  std::string what;            // run.c's name, for messages
  std::string name;            // ours; "{}" stands for the layer index; "" = not a parameter (v0's RoPE tables)
  std::vector<int64_t> shape;  // one block (one layer's, when per_layer)
  bool per_layer = false;      // n_layers consecutive blocks
  const char* row = "";        // matrices: the header field their rows are as long as ("dim", "hidden_dim")
};

// The arrays of a file of `version` (0, 1 or 2) in file order.
std::vector<Llama2cArray> llama2c_layout(int version, const Llama2cSizes& s);

// A per-layer name with its "{}" replaced by `layer`.
std::string llama2c_layer_name(const std::string& pattern, int64_t layer);

}  // namespace tapegrad::lm

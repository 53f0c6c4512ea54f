// llama2c_export.h — a TransformerLM written as a llama2.c model file (the layouts in lm/llama2c.h), for
// `tapegrad export llama2c`: version 0 (float32, what run.c reads), version 1 (float32, "ak42") or
// version 2 (int8 Q8_0, what runq.c reads).
//
//   lm::Llama2cExport e = lm::export_llama2c(model, "model_q80.bin", {.version = 2});
//   // e.group: the group size written (chosen when options.group is 0)
//
// Versions 0 and 1 write float32: a float model's weights as they are, an int8 model's dequantized.
// Version 0 also holds the RoPE tables freq_cis_real/imag [seq_len, head_size/2], cos and sin of
// pos · 10000^(−2k/head_size) (float32, as llama2.c's model.py computes them).
// Version 2 groups every matrix along its rows: the group size must divide dim and hidden_dim (runq.c
// takes its groups over the flattened matrix and quantizes the activations, dim or hidden_dim long, in
// groups of the same size). A float weight is quantized with kernels::quantize_int8 (scale = max|w|/127,
// round half to even, as export.py); an int8 weight of the model is written as it is, bit for bit, so
// its group size must be the file's. Without options.group: the int8 model's own group size, else 64
// when it divides dim and hidden_dim, else the largest power of two below 64 that does.
//
// Refused, before anything is written, with a tapegrad::Error naming what llama2.c cannot express: a
// RoPE theta other than 10000, an RMSNorm eps other than 1e-5, sizes beyond int32, a group size that
// does not divide a row (naming the tensor and the dimension), an int8 model asked for another group
// size. The file is written to a temp file beside it and renamed: `path` is the old file or the whole new one.
#pragma once
#include <cstdint>
#include <string>

#include "nn/transformer_lm.h"

namespace tapegrad::lm {

struct Llama2cExportOptions {
  int version = 0;    // 0, 1 or 2
  int64_t group = 0;  // version 2: values per scale; 0 = choose (see above)
};

// What was written.
struct Llama2cExport {
  int version = 0;
  int64_t group = 0;              // version 2: the group size; 0 otherwise
  std::string group_reason;       // version 2: why this group size ("--group", "the model's own", …)
  bool dequantized = false;       // v0/v1 of an int8 model: its int8 weights were dequantized
  int64_t int8_kept = 0;          // v2: matrices written from the model's own int8 values, unchanged
  int64_t int8_quantized = 0;     // v2: float matrices quantized here
  uint64_t bytes = 0;             // the file's size
};

Llama2cExport export_llama2c(const nn::TransformerLM& model, const std::string& path,
                             const Llama2cExportOptions& options);

// The group size chosen for a float model: 64 if it divides both, else the largest power of two < 64 that does.
int64_t llama2c_default_group(int64_t dim, int64_t hidden_dim);

}  // namespace tapegrad::lm

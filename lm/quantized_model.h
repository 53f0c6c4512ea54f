// quantized_model.h — int8 models on disk (`tapegrad quantize` writes them; generate, eval and info
// read them through load_inference_model, which takes a training checkpoint just as well).
//
//   model->quantize_int8(64);                                   // nn::TransformerLM, Q8_0 groups of 64
//   lm::save_int8_model(*model, "q/checkpoints/step_00000800.safetensors", 800, extra);
//   lm::InferenceModel m = lm::load_inference_model(path);      // float or int8, told by the file
//
// The file is safetensors (docs/quantization.md has the whole layout):
//   model.<prefix>.weight.int8    I8  [rows, cols]   the int8 values of a Linear / the embedding table
//   model.<prefix>.weight.scales  F32 [rows, ⌈cols / group_size⌉]
//   model.<name>                  F32 every other tensor (the RMSNorm weights; float embeddings if kept)
//   __metadata__: format "tapegrad-int8", format_version 1, scheme "q8_0", group_size, step,
//                 config.<key> (TransformerLMConfig), extra.<key> (the source's run.* entries), checksum
// The checksum (autograd/io/checksum.h) covers every metadata entry but itself and every tensor's
// name, dtype, shape and bytes. Reading validates everything before a model exists: the format, the
// checksum, the config and what a model of it allocates (lm/model_budget.h: the RoPE tables and KV cache of
// its context_length too), every name, shape and dtype, int8 values in [−127, 127] (−128 is never
// written and the SIMD kernels assume its absence), finite non-negative scales; one tapegrad::Error
// names the file and what is wrong. Writing is atomic (temp file + rename).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"

namespace tapegrad::lm {

inline constexpr const char* kInt8ModelFormat = "tapegrad-int8";
inline constexpr int kInt8ModelFormatVersion = 1;

// Writes an int8 model (every int8 weight must share one group size) with its step, config and extra.
void save_int8_model(const nn::TransformerLM& model, const std::string& path, int64_t step,
                     const optim::ConfigMap& extra);

// A model ready for inference, and what its file said about it.
struct InferenceModel {
  std::unique_ptr<nn::TransformerLM> model;
  optim::Checkpoint info;   // step, config, extra and model_dtype; no tensors
  int64_t int8_group = 0;   // the int8 group size; 0 for a float model
};

// An int8 model file (see above).
InferenceModel read_int8_model(const std::string& path);
// A training checkpoint (optim::read_checkpoint + lm::model_from_checkpoint) or an int8 model file,
// told apart by the metadata 'format'.
InferenceModel load_inference_model(const std::string& path);
// Whether `path` is a safetensors file whose metadata says it is an int8 model (false for anything
// unreadable: the reader it is then given reports the problem).
bool is_int8_model_file(const std::string& path);

// The scalar weights of a model, int8 and float (a released float weight no longer counts in
// num_parameters()), and the bytes they take.
struct WeightCount {
  int64_t values = 0, int8_values = 0;
  int64_t bytes = 0;  // int8 values + their scales + 4 × float values
};
WeightCount count_weights(const nn::TransformerLM& model);

}  // namespace tapegrad::lm

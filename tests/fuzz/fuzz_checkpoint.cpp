// fuzz_checkpoint.cpp — libFuzzer target: the input is a checkpoint file (optim/checkpoint.h,
// lm/model_io.h, docs/checkpoints.md). Asserts: read_checkpoint throws only tapegrad::Error (a flipped
// byte is caught by the layout checks or the checksum); for a checkpoint it reads, building the model
// from it (model_from_checkpoint, any config) throws only Error, keeps the allocation bound (model_bound.h)
// and the parameter count equals the stored tensors'. Because a random change rarely keeps the checksum
// valid, the config reader is also fuzzed directly: the "config.<key>" metadata of any safetensors input
// is parsed by TransformerLMConfig::from_config_map, and a config it accepts must survive to_config_map →
// from_config_map unchanged (config_differences empty); and a checkpoint input is read a second time with
// its checksum recomputed (optim::checkpoint_checksum), so that mutated configs reach model_from_checkpoint.
#include <map>
#include <memory>
#include <string>

#include "autograd/io/safetensors.h"
#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/model_io.h"
#include "model_bound.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"

using namespace tapegrad;

namespace {

void check_config_map(const std::map<std::string, std::string>& map) {
  nn::TransformerLMConfig config;
  try {
    config = nn::TransformerLMConfig::from_config_map(map);
  } catch (const Error&) {
    return;
  }
  const auto again = config.to_config_map();
  const nn::TransformerLMConfig config2 = nn::TransformerLMConfig::from_config_map(again);
  FUZZ_ASSERT(optim::config_differences(config2.to_config_map(), again).empty(),
              "config changed in to_config_map/from_config_map: " +
                  optim::config_differences(config2.to_config_map(), again));
}

// The checkpoint at `path`: read, checked, and its model built (bounded by model_from_checkpoint).
void check_checkpoint(const std::string& path, size_t input_bytes) {
  optim::Checkpoint ck;
  try {
    ck = optim::read_checkpoint(path);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return;
  }
  FUZZ_ASSERT(ck.step >= 0, "read_checkpoint accepted a negative step");
  int64_t stored = 0;
  for (const auto& [name, t] : ck.model_state) stored += t.numel();
  FUZZ_ASSERT(lm::checkpoint_parameter_count(ck) == stored, "parameter count differs from the stored tensors");
  check_config_map(ck.config);
  std::unique_ptr<nn::TransformerLM> model;
  try {
    model = lm::model_from_checkpoint(ck, path);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return;
  }
  fuzz::check_config_bound(model->config, input_bytes, "model_from_checkpoint");
  fuzz::check_model_bound(*model, input_bytes, "model_from_checkpoint");
}

// A checkpoint input with its checksum recomputed, written to the scratch directory; "" when the input is no
// safetensors file with the checkpoint format.
std::string reseal(const std::string& path, const fuzz::ScratchDir& scratch) {
  try {
    std::map<std::string, std::string> meta;
    const optim::TensorMap tensors = load_safetensors(path, &meta);
    const auto format = meta.find("format");
    if (format == meta.end() || format->second != optim::kCheckpointFormat) return "";
    meta.erase("checksum");
    meta["checksum"] = optim::checkpoint_checksum(meta, tensors);
    const std::string out = scratch.file("resealed.safetensors");
    save_safetensors(out, tensors, meta);
    return out;
  } catch (const Error&) {
    return "";
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("checkpoint");
  static const fuzz::ScratchDir scratch;
  fuzz::limit_model_allocation();
  const std::string& path = input.set(fuzz::as_view(data, size));

  // The config reader, on whatever config.* metadata the file holds (checksum or not).
  try {
    std::map<std::string, std::string> metadata;
    const SafetensorsFile file(path);
    std::map<std::string, std::string> config;
    for (const auto& [key, value] : file.metadata())
      if (key.starts_with("config.")) config[key.substr(7)] = value;
    if (!config.empty()) check_config_map(config);
  } catch (const Error&) {
  }

  check_checkpoint(path, size);
  const std::string resealed = reseal(path, scratch);
  if (!resealed.empty()) {
    check_checkpoint(resealed, size);
    scratch.remove("resealed.safetensors");
  }
  return 0;
}

// fuzz_checkpoint.cpp — libFuzzer target: the input is a checkpoint file (optim/checkpoint.h,
// lm/model_io.h, docs/checkpoints.md). Asserts: read_checkpoint throws only tapegrad::Error (a flipped
// byte is caught by the layout checks or the checksum); for a checkpoint it reads, building the model
// from it (model_from_checkpoint, when the stored config is small) throws only Error and the parameter
// count equals the stored tensors'. Because a random change rarely keeps the checksum valid, the config
// reader is also fuzzed directly: the "config.<key>" metadata of any safetensors input is parsed by
// TransformerLMConfig::from_config_map, and a config it accepts must survive to_config_map →
// from_config_map unchanged (config_differences empty).
#include <map>
#include <string>

#include "autograd/io/safetensors.h"
#include "fuzz_common.h"
#include "kernels/error.h"
#include "lm/model_io.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"

using namespace tapegrad;

namespace {

// Models this small are built from the checkpoint; larger configs are only parsed (a config is under
// the checksum, so only a writer could make a huge one; its allocation is not what this target tests).
bool small_config(const nn::TransformerLMConfig& c) {
  return c.vocab_size <= 4096 && c.context_length <= 4096 && c.d_model <= 256 && c.n_layers <= 8 &&
         c.n_heads <= 64 && c.d_ff <= 1024;
}

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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("checkpoint");
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

  optim::Checkpoint ck;
  try {
    ck = optim::read_checkpoint(path);
  } catch (const Error& e) {
    fuzz::note_rejected(e.what());
    return 0;
  }
  FUZZ_ASSERT(ck.step >= 0, "read_checkpoint accepted a negative step");
  int64_t stored = 0;
  for (const auto& [name, t] : ck.model_state) stored += t.numel();
  FUZZ_ASSERT(lm::checkpoint_parameter_count(ck) == stored, "parameter count differs from the stored tensors");
  check_config_map(ck.config);
  try {
    const nn::TransformerLMConfig config = nn::TransformerLMConfig::from_config_map(ck.config);
    if (small_config(config)) (void)lm::model_from_checkpoint(ck, path);
  } catch (const Error&) {
  }
  return 0;
}

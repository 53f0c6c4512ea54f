// model_io.cpp — model and tokenizer from a checkpoint (see model_io.h).
#include "lm/model_io.h"

#include <filesystem>

#include "autograd/io/exact_number.h"
#include "data/tokenizer_files.h"
#include "lm/model_budget.h"
#include "lm/run_dir.h"
#include "optim/adamw.h"

namespace tapegrad::lm {

std::unique_ptr<nn::TransformerLM> model_from_checkpoint(const optim::Checkpoint& ck, const std::string& path) {
  nn::TransformerLMConfig config;
  try {
    config = nn::TransformerLMConfig::from_config_map(ck.config);
  } catch (const Error& e) {
    throw Error(fmt::format("checkpoint '{}' does not hold a TransformerLM config: {}", path, e.what()));
  }
  check_model_allocation(config, double(checkpoint_parameter_count(ck)), fmt::format("checkpoint '{}'", path));
  auto model = std::make_unique<nn::TransformerLM>(config);
  try {
    model->load_state_dict(ck.model_state);
  } catch (const Error& e) {
    throw Error(fmt::format("checkpoint '{}': {}", path, e.what()));
  }
  return model;
}

data::BpeModel tokenizer_for_checkpoint(const optim::Checkpoint& ck, const std::string& path,
                                        const std::string& override_path) {
  std::string source = override_path;
  if (source.empty()) {
    const std::string run = run_dir_of_checkpoint(path);
    const std::string candidate = (std::filesystem::path(run.empty() ? "." : run) / "tokenizer.json").string();
    TG_CHECK(!run.empty() && std::filesystem::exists(candidate),
             "no tokenizer for checkpoint '{}': pass --tokenizer (the run directory holds no tokenizer.json)", path);
    source = candidate;
  }
  data::BpeModel model = data::load_tokenizer_model(source);
  const auto recorded = ck.extra.find("run.tokenizer_fingerprint");
  if (recorded != ck.extra.end()) {
    const std::string mine = data::tokenizer_fingerprint(model);
    TG_CHECK(mine == recorded->second,
             "tokenizer '{}' (fingerprint {}) is not the one checkpoint '{}' was trained with (fingerprint {})", source,
             mine, path, recorded->second);
  }
  const auto vocab = ck.config.find("vocab_size");
  if (vocab != ck.config.end())
    TG_CHECK(model.vocab.size() <=
                 parse_number<uint64_t>(vocab->second, fmt::format("checkpoint '{}': config.vocab_size", path)),
             "tokenizer '{}' has {} tokens, more than the vocabulary of checkpoint '{}' ({})", source, model.vocab.size(),
             path, vocab->second);
  return model;
}

void save_model_checkpoint(nn::TransformerLM& model, const std::string& path, const optim::ConfigMap& extra) {
  const optim::AdamW optimizer(model.parameters());
  const Generator generator;
  optim::save_checkpoint(path, model.state_dict(), optimizer, 0, generator, model.config.to_config_map(), extra);
}

int64_t checkpoint_parameter_count(const optim::Checkpoint& ck) {
  int64_t n = 0;
  for (const auto& [name, t] : ck.model_state) n += t.numel();
  return n;
}

}  // namespace tapegrad::lm

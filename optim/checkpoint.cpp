// checkpoint.cpp — save_checkpoint / read_checkpoint / load_checkpoint (format in checkpoint.h and
// docs/checkpoints.md). Numbers in the metadata are exact decimal strings: integers as such, doubles
// in fmt's shortest round-trip form, read back with std::from_chars (correctly rounded → same bits).
#include "optim/checkpoint.h"

#include <cmath>
#include <cstring>
#include <set>
#include <vector>

#include "autograd/io/checksum.h"
#include "autograd/io/exact_number.h"
#include "autograd/io/safetensors.h"
#include "kernels/error.h"

namespace tapegrad::optim {

namespace {

// Typed access to the "__metadata__" strings; every problem names the file and the key.
class Meta {
 public:
  Meta(const std::string& path, const std::map<std::string, std::string>& m) : path_(path), m_(m) {}
  const std::string& str(const std::string& key) const {
    auto it = m_.find(key);
    TG_CHECK(it != m_.end(), "checkpoint '{}': the metadata has no '{}'", path_, key);
    return it->second;
  }
  template <class T>
  T num(const std::string& key) const {
    const std::string& s = str(key);
    return parse_number<T>(s, fmt::format("checkpoint '{}': metadata '{}'", path_, key));
  }

 private:
  const std::string& path_;
  const std::map<std::string, std::string>& m_;
};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + items[i];
  return out;
}

// The checkpoint's checksum (autograd/io/checksum.h) covers every metadata entry except "checksum"
// and every tensor's name, dtype, shape and bytes, each length-prefixed.
void add_tensor(io::Checksum& c, const std::string& name, const Tensor& t) {
  c.text(name);
  c.text(dtype_name(t.dtype()));
  c.word(static_cast<uint64_t>(t.dim()));
  for (int64_t d = 0; d < t.dim(); ++d) c.word(static_cast<uint64_t>(t.size(d)));
  const Tensor ct = t.detach().to(kCPU).contiguous();
  c.bytes(ct.data_ptr(), static_cast<size_t>(ct.numel()) * dtype_size(ct.dtype()));
}

std::string sizes(const std::vector<int64_t>& v) {
  std::vector<std::string> items;
  for (int64_t x : v) items.push_back(fmt::format("{}", x));
  return join(items);
}

}  // namespace

std::string checkpoint_checksum(const std::map<std::string, std::string>& meta, const TensorMap& tensors) {
  io::Checksum c;
  for (const auto& [k, v] : meta) {
    if (k == "checksum") continue;
    c.text(k);
    c.text(v);
  }
  for (const auto& [name, t] : tensors) add_tensor(c, name, t);
  return c.hex();
}

OptimizerInfo describe_optimizer(const Optimizer& optimizer) {
  OptimizerInfo info;
  info.kind = optimizer.kind();
  info.fixed = optimizer.fixed_hyperparameters();
  for (size_t g = 0; g < optimizer.num_groups(); ++g) {
    info.lr.push_back(optimizer.lr(g));
    info.weight_decay.push_back(optimizer.weight_decay(g));
    info.group_sizes.push_back(static_cast<int64_t>(optimizer.param_groups()[g].params.size()));
  }
  return info;
}

std::string config_differences(const ConfigMap& file, const ConfigMap& expected) {
  std::vector<std::string> diffs;
  std::set<std::string> keys;
  for (const auto& kv : file) keys.insert(kv.first);
  for (const auto& kv : expected) keys.insert(kv.first);
  for (const std::string& k : keys) {
    auto f = file.find(k);
    auto e = expected.find(k);
    if (f == file.end())
      diffs.push_back(fmt::format("{} missing in the file (expected {})", k, e->second));
    else if (e == expected.end())
      diffs.push_back(fmt::format("{} {} (file) is not expected", k, f->second));
    else if (f->second != e->second)
      diffs.push_back(fmt::format("{} {} (file) vs {} (expected)", k, f->second, e->second));
  }
  return diffs.empty() ? std::string() : "checkpoint config differs: " + join(diffs);
}

void save_checkpoint(const std::string& path, const TensorMap& model_state, const Optimizer& optimizer, int64_t step,
                     const Generator& generator, const ConfigMap& config, const ConfigMap& extra) {
  TG_CHECK(step >= 0, "writing checkpoint '{}': step must be >= 0, but is {}", path, step);
  const OptimizerInfo info = describe_optimizer(optimizer);

  TensorMap tensors;
  std::set<std::string> dtypes;
  for (const auto& [name, t] : model_state) {
    TG_CHECK(t.defined(), "writing checkpoint '{}': model tensor '{}' is undefined", path, name);
    tensors.emplace("model." + name, t);
    dtypes.insert(dtype_name(t.dtype()));
  }
  for (const auto& [name, t] : optimizer.state_view()) tensors.emplace("optim." + name, t);  // written, not copied

  std::map<std::string, std::string> meta;
  meta["format"] = kCheckpointFormat;
  meta["format_version"] = fmt::format("{}", kCheckpointFormatVersion);
  meta["step"] = fmt::format("{}", step);
  meta["model_dtype"] = dtypes.empty() ? "none" : dtypes.size() == 1 ? *dtypes.begin() : "mixed";
  const Generator::State rng = generator.state();
  for (size_t i = 0; i < rng.s.size(); ++i) meta[fmt::format("rng.s{}", i)] = fmt::format("{}", rng.s[i]);
  meta["rng.has_spare"] = rng.has_spare ? "1" : "0";
  meta["rng.spare"] = format_exact(rng.spare);
  meta["optim.kind"] = info.kind;
  for (const auto& [k, v] : info.fixed) meta["optim.fixed." + k] = format_exact(v);
  meta["optim.groups"] = fmt::format("{}", info.lr.size());
  for (size_t g = 0; g < info.lr.size(); ++g) {
    meta[fmt::format("optim.group.{}.params", g)] = fmt::format("{}", info.group_sizes[g]);
    meta[fmt::format("optim.group.{}.lr", g)] = format_exact(info.lr[g]);
    meta[fmt::format("optim.group.{}.weight_decay", g)] = format_exact(info.weight_decay[g]);
  }
  for (const auto& [k, v] : config) meta["config." + k] = v;
  for (const auto& [k, v] : extra) meta["extra." + k] = v;
  meta["checksum"] = checkpoint_checksum(meta, tensors);

  try {
    save_safetensors(path, tensors, meta);  // atomic: temp file, fsync, rename, fsync of the directory
  } catch (const Error& e) {
    throw Error(fmt::format("writing checkpoint: {}", e.what()));
  }
}

Checkpoint read_checkpoint(const std::string& path) {
  std::map<std::string, std::string> metadata;
  TensorMap all;
  try {
    const SafetensorsFile file(path);  // the header, checked
    metadata = file.metadata();
    // An int8 model (lm/quantized_model.h) is refused before its int8 tensors are read.
    auto format = metadata.find("format");
    TG_CHECK(format == metadata.end() || format->second != "tapegrad-int8",
             "it is an int8 model (written by `tapegrad quantize`): generate, eval and info read it, but it cannot "
             "be trained or resumed; train from the float checkpoint it was made from");
    all = file.load_all();
  } catch (const Error& e) {
    throw Error(fmt::format("checkpoint '{}' cannot be read: {}", path, e.what()));
  }
  const Meta meta(path, metadata);
  // First: is this a complete, uncorrupted tapegrad checkpoint? (SafetensorsFile has checked the layout.)
  auto format = metadata.find("format");
  TG_CHECK(format != metadata.end() && format->second == kCheckpointFormat,
           "checkpoint '{}': not a tapegrad checkpoint (metadata 'format' is not '{}')", path, kCheckpointFormat);
  const auto version = meta.num<int64_t>("format_version");
  TG_CHECK(version == kCheckpointFormatVersion, "checkpoint '{}': format version {} is not supported (this build reads {})",
           path, version, kCheckpointFormatVersion);
  const std::string& stored = meta.str("checksum");
  const std::string computed = checkpoint_checksum(metadata, all);
  TG_CHECK(stored == computed, "checkpoint '{}' is corrupt: its checksum is {} but its contents hash to {}", path,
           stored, computed);

  Checkpoint ck;
  ck.step = meta.num<int64_t>("step");
  TG_CHECK(ck.step >= 0, "checkpoint '{}': step {} is negative", path, ck.step);
  ck.model_dtype = meta.str("model_dtype");
  for (size_t i = 0; i < ck.rng.s.size(); ++i) ck.rng.s[i] = meta.num<uint64_t>(fmt::format("rng.s{}", i));
  const std::string& spare = meta.str("rng.has_spare");
  TG_CHECK(spare == "0" || spare == "1", "checkpoint '{}': metadata 'rng.has_spare' = '{}' is not 0 or 1", path, spare);
  ck.rng.has_spare = spare == "1";
  ck.rng.spare = meta.num<double>("rng.spare");

  OptimizerInfo& info = ck.optimizer;
  info.kind = meta.str("optim.kind");
  TG_CHECK(!info.kind.empty(), "checkpoint '{}': metadata 'optim.kind' is empty", path);
  for (const auto& [k, v] : metadata)  // the optimizer's fixed hyperparameters: "optim.fixed.<name>"
    if (k.starts_with("optim.fixed.")) info.fixed[k.substr(12)] = meta.num<double>(k);
  const auto groups = meta.num<int64_t>("optim.groups");
  TG_CHECK(groups >= 1 && groups <= 1'000'000, "checkpoint '{}': 'optim.groups' = {} is out of range", path, groups);
  for (int64_t g = 0; g < groups; ++g) {
    info.group_sizes.push_back(meta.num<int64_t>(fmt::format("optim.group.{}.params", g)));
    info.lr.push_back(meta.num<double>(fmt::format("optim.group.{}.lr", g)));
    info.weight_decay.push_back(meta.num<double>(fmt::format("optim.group.{}.weight_decay", g)));
    TG_CHECK(std::isfinite(info.lr.back()) && info.lr.back() >= 0 && std::isfinite(info.weight_decay.back()) &&
                 info.weight_decay.back() >= 0 && info.group_sizes.back() >= 0,
             "checkpoint '{}': group {} has an invalid lr, weight decay or parameter count", path, g);
  }

  for (const auto& [k, v] : metadata) {
    if (k.starts_with("config.")) ck.config.emplace(k.substr(7), v);
    if (k.starts_with("extra.")) ck.extra.emplace(k.substr(6), v);
  }

  for (auto& [name, t] : all) {
    if (name.starts_with("model."))
      ck.model_state.emplace(name.substr(6), std::move(t));
    else if (name.starts_with("optim."))
      ck.optimizer_state.emplace_back(name.substr(6), std::move(t));
    else
      throw Error(fmt::format("checkpoint '{}': unexpected tensor '{}' (names start with 'model.' or 'optim.')", path,
                              name));
  }
  return ck;
}

int64_t load_checkpoint(const std::string& path, const ModelLoader& load_model, Optimizer& optimizer,
                        Generator& generator, const ConfigMap& expected_config) {
  return load_checkpoint(read_checkpoint(path), path, load_model, optimizer, generator, expected_config);
}

int64_t load_checkpoint(const Checkpoint& ck, const std::string& path, const ModelLoader& load_model,
                        Optimizer& optimizer, Generator& generator, const ConfigMap& expected_config) {
  // 1. Check everything (read_checkpoint validated the file); nothing is modified before step 2.
  const std::string diffs = config_differences(ck.config, expected_config);
  TG_CHECK(diffs.empty(), "checkpoint '{}': {}", path, diffs);

  const OptimizerInfo mine = describe_optimizer(optimizer);
  const OptimizerInfo& theirs = ck.optimizer;
  TG_CHECK(theirs.kind == mine.kind, "checkpoint '{}': the checkpoint holds {} optimizer state but the optimizer is {}",
           path, theirs.kind, mine.kind);
  std::vector<std::string> hyper;
  for (const auto& [k, v] : mine.fixed) {
    const auto stored = theirs.fixed.find(k);
    TG_CHECK(stored != theirs.fixed.end(), "checkpoint '{}': the checkpoint has no {} hyperparameter '{}' "
             "(metadata 'optim.fixed.{}')", path, mine.kind, k, k);
    if (stored->second != v) hyper.push_back(fmt::format("{} {} (file) vs {} (optimizer)", k, format_exact(stored->second), format_exact(v)));
  }
  TG_CHECK(hyper.empty(), "checkpoint '{}': {} hyperparameters differ: {}", path, mine.kind, join(hyper));
  TG_CHECK(theirs.group_sizes == mine.group_sizes,
           "checkpoint '{}': the checkpoint's optimizer has parameter groups of sizes [{}] but this one [{}]", path,
           sizes(theirs.group_sizes), sizes(mine.group_sizes));

  // 2. Commit. The optimizer first (load_state checks all of it before replacing anything), then
  // the model (its loader checks before copying); if the model refuses, the optimizer is put back.
  const StateList old_state = optimizer.state();
  try {
    optimizer.load_state(ck.optimizer_state);
  } catch (const Error& e) {
    throw Error(fmt::format("checkpoint '{}': {}", path, e.what()));
  }
  try {
    load_model(ck.model_state);
  } catch (const Error& e) {
    optimizer.load_state(old_state);
    throw Error(fmt::format("checkpoint '{}': {}", path, e.what()));
  } catch (...) {
    optimizer.load_state(old_state);
    throw;
  }
  for (size_t g = 0; g < theirs.lr.size(); ++g) {  // validated in read_checkpoint: cannot throw
    optimizer.set_lr(g, theirs.lr[g]);
    optimizer.set_weight_decay(g, theirs.weight_decay[g]);
  }
  generator.set_state(ck.rng);
  return ck.step;
}

}  // namespace tapegrad::optim

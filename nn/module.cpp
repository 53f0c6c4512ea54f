// module.cpp — Module's registries, traversal, and state-dict load/save.
#include "nn/module.h"

#include <set>

namespace tapegrad::nn {
namespace {
std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}
}  // namespace

void Module::check_new_name(const std::string& name) const {
  TG_CHECK(!name.empty() && name.find('.') == std::string::npos,
           "Module: a name must be non-empty and contain no '.', got '{}'", name);
  bool taken = false;
  for (const auto& [n, t] : params_) taken |= n == name;
  for (const auto& b : buffers_) taken |= b.name == name;
  for (const auto& [n, m] : children_) taken |= n == name;
  TG_CHECK(!taken, "Module: the name '{}' is already registered", name);
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name);
  TG_CHECK(t.defined(), "Module::register_parameter: '{}' is undefined", name);
  TG_CHECK(t.is_leaf(), "Module::register_parameter: '{}' must be a leaf (detach it first)", name);
  if (requires_grad) t.requires_grad_(true);
  params_.emplace_back(name, t);
  return t;
}

void Module::release_parameter(const std::string& name) {
  std::erase_if(params_, [&](const auto& p) { return p.first == name; });
}

Tensor Module::register_buffer(const std::string& name, Tensor t, bool persistent) {
  check_new_name(name);
  TG_CHECK(t.defined(), "Module::register_buffer: '{}' is undefined", name);
  buffers_.push_back({name, t, persistent});
  return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> module) {
  check_new_name(name);
  TG_CHECK(module != nullptr, "Module::register_module: '{}' is null", name);
  children_.emplace_back(name, std::move(module));
}

void Module::collect_parameters(const std::string& prefix, bool recurse, NamedTensors& out) const {
  for (const auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  if (!recurse) return;
  for (const auto& [n, m] : children_) m->collect_parameters(prefix + n + ".", true, out);
}

void Module::collect_buffers(const std::string& prefix, bool recurse, bool persistent_only, NamedTensors& out) const {
  for (const auto& b : buffers_)
    if (b.persistent || !persistent_only) out.emplace_back(prefix + b.name, b.tensor);
  if (!recurse) return;
  for (const auto& [n, m] : children_) m->collect_buffers(prefix + n + ".", true, persistent_only, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect_parameters("", recurse, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters(recurse)) out.push_back(t);
  return out;
}

void Module::to(Device device) {
  // Plan: a copy on `device` for each tensor not already there (each TensorImpl once: tied or
  // shared tensors move together). Commit only when every copy succeeded.
  std::vector<std::pair<TensorImpl*, Tensor>> moves;
  std::set<const TensorImpl*> seen;
  auto plan = [&](const Tensor& t) {
    if (t.defined() && t.device() != device && seen.insert(t.impl().get()).second)
      moves.emplace_back(t.impl().get(), t.detach().to(device));
  };
  for (const auto& [name, p] : named_parameters()) {
    plan(p);
    plan(p.grad());
  }
  for (const auto& [name, b] : named_buffers()) plan(b);
  for (auto& [impl, moved] : moves) {
    impl->storage = moved.impl()->storage;
    impl->strides = moved.strides();
    impl->offset = moved.offset();
  }
}

NamedTensors Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect_buffers("", recurse, false, out);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::zero_grad() {
  for (auto& [n, t] : named_parameters()) t.zero_grad();
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

StateDict Module::state_dict() const {
  StateDict out;
  NamedTensors all;
  collect_parameters("", true, all);
  collect_buffers("", true, true, all);
  for (auto& [n, t] : all) out.emplace(n, t);
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  NamedTensors mine;
  collect_parameters("", true, mine);
  collect_buffers("", true, true, mine);
  std::vector<std::string> missing, unexpected, mis_shaped;
  std::set<std::string> known;
  for (const auto& [name, t] : mine) {
    known.insert(name);
    auto it = state.find(name);
    if (it == state.end()) {
      missing.push_back(name);
    } else if (!it->second.defined() || it->second.shape() != t.shape()) {
      mis_shaped.push_back(fmt::format("{} (expected {}, got {})", name, t.shape(),
                                       it->second.defined() ? fmt::format("{}", it->second.shape()) : "undefined"));
    }
  }
  for (const auto& [name, t] : state)
    if (!known.count(name)) unexpected.push_back(name);
  const bool bad = !mis_shaped.empty() || (strict && (!missing.empty() || !unexpected.empty()));
  if (bad) {
    std::string msg = "load_state_dict: the state dict does not match the module:";
    if (strict && !missing.empty()) msg += fmt::format("\n  missing: {}", join(missing));
    if (strict && !unexpected.empty()) msg += fmt::format("\n  unexpected: {}", join(unexpected));
    if (!mis_shaped.empty()) msg += fmt::format("\n  wrong shape: {}", join(mis_shaped));
    throw Error(msg);
  }
  NoGradGuard no_grad;  // copy_ into leaves that require grad is allowed only without recording
  for (auto& [name, t] : mine) {
    auto it = state.find(name);
    if (it != state.end()) t.copy_(it->second);
  }
}

}  // namespace tapegrad::nn

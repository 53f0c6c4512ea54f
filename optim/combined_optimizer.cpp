// combined_optimizer.cpp — CombinedOptimizer: groups and indices of several optimizers as one (see the header).
#include "optim/combined_optimizer.h"

#include <cctype>

#include "kernels/error.h"

namespace tapegrad::optim {

namespace {

std::string joined_kind(const std::vector<std::unique_ptr<Optimizer>>& parts) {
  TG_CHECK(!parts.empty(), "CombinedOptimizer: needs at least one optimizer");
  std::string kind;
  for (const auto& p : parts) {
    TG_CHECK(p != nullptr, "CombinedOptimizer: a part is null");
    kind += (kind.empty() ? "" : "+") + p->kind();
  }
  return kind;
}

std::vector<ParamGroup> all_groups(const std::vector<std::unique_ptr<Optimizer>>& parts) {
  std::vector<ParamGroup> groups;
  for (const auto& p : parts)
    for (const ParamGroup& g : p->param_groups()) groups.push_back(g);  // lr, weight decay set by the part
  return groups;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// The base checks that no parameter appears twice across the parts (one list of all groups).
CombinedOptimizer::CombinedOptimizer(std::vector<std::unique_ptr<Optimizer>> parts)
    : Optimizer(joined_kind(parts), all_groups(parts), parts.front()->lr(0), parts.front()->weight_decay(0)),
      parts_(std::move(parts)) {
  size_t group = 0, param = 0;
  for (const auto& p : parts_) {
    spans_.push_back({group, param});
    group += p->num_groups();
    param += p->params().size();
  }
}

void CombinedOptimizer::step() {
  for (size_t k = 0; k < parts_.size(); ++k)
    for (size_t g = 0; g < parts_[k]->num_groups(); ++g) {  // this optimizer's groups hold the current values
      parts_[k]->set_lr(g, lr(spans_[k].first_group + g));
      parts_[k]->set_weight_decay(g, weight_decay(spans_[k].first_group + g));
    }
  for (auto& p : parts_) p->step();
}

std::map<std::string, double> CombinedOptimizer::fixed_hyperparameters() const {
  std::map<std::string, double> out;
  for (const auto& p : parts_)
    for (const auto& [k, v] : p->fixed_hyperparameters()) out[lower(p->kind()) + "." + k] = v;
  return out;
}

StateList CombinedOptimizer::state_view() const {
  StateList out;
  for (size_t k = 0; k < parts_.size(); ++k)
    for (auto& [name, t] : parts_[k]->state_view()) {
      size_t i = 0;
      std::string buffer;
      TG_CHECK(split_state_name(name, i, buffer), "{}: part {} returned a state name '{}'", kind(), k, name);
      out.emplace_back(fmt::format("{}.{}", spans_[k].first_param + i, buffer), std::move(t));
    }
  return out;
}

void CombinedOptimizer::load_state(const StateList& state) {
  const size_t total = params().size();
  std::vector<StateList> split(parts_.size());
  for (const auto& [name, t] : state) {
    size_t i = 0;
    std::string buffer;
    TG_CHECK(split_state_name(name, i, buffer),
             "{}: load_state: bad state name '{}' (expected '<index>.<buffer>')", kind(), name);
    TG_CHECK(i < total, "{}: load_state: '{}' names parameter {} but there are {} parameters", kind(), name, i, total);
    size_t k = parts_.size() - 1;
    while (spans_[k].first_param > i) --k;
    split[k].emplace_back(fmt::format("{}.{}", i - spans_[k].first_param, buffer), t);
  }
  std::vector<StateList> old;
  for (const auto& p : parts_) old.push_back(p->state());
  size_t k = 0;
  try {
    for (; k < parts_.size(); ++k) parts_[k]->load_state(split[k]);
  } catch (...) {
    for (size_t j = 0; j < k; ++j) parts_[j]->load_state(old[j]);  // all or nothing
    throw;
  }
}

}  // namespace tapegrad::optim

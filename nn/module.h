// module.h — Module: the base of every layer, libtorch style. A module owns named parameters
// (leaves that require grad), named buffers (constants such as RoPE tables) and named child
// modules (held by std::shared_ptr). Names are dotted paths in registration order:
//
//   class Mlp : public Module {
//    public:
//     Mlp() { fc = register_module("fc", std::make_shared<Linear>(4, 8)); }
//     std::shared_ptr<Linear> fc;
//   };
//   Mlp m;  m.named_parameters();   // {"fc.weight", [8, 4]}
//
// Subclasses keep copies of the handles they register (a Tensor copy shares its TensorImpl),
// so load_state_dict, which writes in place, updates what forward() reads.
// Modules are not copyable: copying would alias parameters silently.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

namespace tapegrad::nn {

// name → tensor, as written/read by state_dict / load_state_dict (and by load_safetensors).
using StateDict = std::map<std::string, Tensor>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // A parameter: `t` becomes a leaf that requires grad (when requires_grad). Returns the handle.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  // Drops a registered parameter (a Linear whose weight became int8: nn/linear.h); no-op if absent.
  void release_parameter(const std::string& name);
  // A buffer: state that is not trained. Non-persistent buffers stay out of state_dict
  // (like PyTorch's persistent=False; RoPE's cos/sin tables are recomputed, never saved).
  Tensor register_buffer(const std::string& name, Tensor t, bool persistent = true);
  // A child module; its names appear under "name.".
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    add_child(name, module);
    return module;
  }

  // Dotted names, this module's own first, then each child's in registration order.
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  int64_t num_parameters() const;  // total number of scalar parameter values

  // Clears every parameter's .grad (undefined afterwards, PyTorch's set_to_none).
  void zero_grad();
  // Training / evaluation mode, propagated to all children.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Moves every parameter (with its .grad) and every buffer to `device`, in place: the handles
  // subclasses hold see the move. All copies are made first, so a device that is not available
  // (no CUDA backend in this build or machine) is a tapegrad::Error and nothing has moved.
  void to(Device device);

  // Parameters and persistent buffers by dotted name (handles to the live tensors, not copies).
  StateDict state_dict() const;
  // Copies values (converting dtype) into the live parameters/buffers, without recording.
  // strict: every name must be present exactly, with the right shape; otherwise one
  // tapegrad::Error lists all missing, unexpected and mis-shaped names. Non-strict: missing and
  // unexpected names are skipped, a shape mismatch is still an error.
  void load_state_dict(const StateDict& state, bool strict = true);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect_parameters(const std::string& prefix, bool recurse, NamedTensors& out) const;
  void collect_buffers(const std::string& prefix, bool recurse, bool persistent_only, NamedTensors& out) const;

  struct Buffer {
    std::string name;
    Tensor tensor;
    bool persistent;
  };
  NamedTensors params_;
  std::vector<Buffer> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// While one is alive (per thread), Linear and Embedding create their weights uninitialized (`empty`,
// no random numbers, no page touched): for a model whose weights are loaded right after, e.g. an int8
// model whose float weights are released unread (lm/quantized_model.h) — its peak memory stays that of
// the int8 weights.
class SkipParameterInitGuard {
 public:
  SkipParameterInitGuard() : prev_(active_) { active_ = true; }
  ~SkipParameterInitGuard() { active_ = prev_; }
  SkipParameterInitGuard(const SkipParameterInitGuard&) = delete;
  SkipParameterInitGuard& operator=(const SkipParameterInitGuard&) = delete;
  static bool active() { return active_; }

 private:
  bool prev_;
  static inline thread_local bool active_ = false;
};

// An ordered list of modules named "0", "1", … (TransformerLM's "layers").
class ModuleList : public Module {
 public:
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    items_.push_back(module);
    return register_module(std::to_string(items_.size() - 1), std::move(module));
  }
  size_t size() const { return items_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const { return items_.at(i); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

}  // namespace tapegrad::nn

// optimizer.h — Optimizer: the base of every optimizer, over parameter groups.
//
//   AdamW opt({w, b}, AdamWOptions(1e-3));
//   for (...) { opt.zero_grad(); loss(...).backward(); opt.step(); }
//
// A ParamGroup is a list of parameters with its own lr and weight decay (unset → the optimizer's
// defaults), e.g. no weight decay for norms and biases:
//   AdamW opt({ParamGroup{matrices}, ParamGroup{gains, {}, 0.0}}, AdamWOptions(3e-4));
//
// Parameters must be leaves that require grad, float32 or float64, each listed once. step()
// updates them in place under NoGradGuard (tapegrad's in-place ops refuse to touch a tensor that
// requires grad while grad mode is on) and skips parameters whose .grad is undefined.
//
// Per-parameter state (momentum buffers, Adam moments) is created lazily on a parameter's first
// update and can be read and restored for checkpoints as a flat list of named tensors:
//   "<i>.<buffer>" where i is the parameter's position counting through all groups in order,
//   e.g. "0.exp_avg", "0.exp_avg_sq", "0.step" (AdamW), "3.momentum_buffer" (SGD).
// state() returns copies; load_state() checks every name, shape and dtype and copies the values in.
// Hyperparameters (lr, weight decay) are not part of state(): a schedule sets them each step.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad::optim {

struct ParamGroup {
  ParamGroup(std::vector<Tensor> params_, std::optional<double> lr_ = std::nullopt,
             std::optional<double> weight_decay_ = std::nullopt)
      : params(std::move(params_)), lr(lr_), weight_decay(weight_decay_) {}
  std::vector<Tensor> params;
  std::optional<double> lr;            // unset: the optimizer's default lr
  std::optional<double> weight_decay;  // unset: the optimizer's default weight decay
};

// Named state tensors, in a stable order (parameter index, then buffer name).
using StateList = std::vector<std::pair<std::string, Tensor>>;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient.
  virtual void step() = 0;
  // Clears every parameter's .grad (undefined afterwards, like PyTorch's set_to_none).
  void zero_grad();

  // Learning rate of group `group` / of every group (for schedules).
  double lr(size_t group = 0) const;
  void set_lr(double lr);
  void set_lr(size_t group, double lr);
  // The lr group `group` had when the optimizer was made (PyTorch's group["initial_lr"]).
  double initial_lr(size_t group = 0) const;
  // A schedule computed for `reference_lr` moves every group in proportion (PyTorch's LambdaLR):
  // group g gets lr·initial_lr(g)/reference_lr — exactly `lr` where initial_lr(g) == reference_lr. So a
  // Muon group made with lr 0.02 beside AdamW groups made with 1e-3 follows the same warm-up and decay.
  void set_lr_relative(double lr, double reference_lr);
  double weight_decay(size_t group = 0) const;
  void set_weight_decay(size_t group, double weight_decay);

  size_t num_groups() const { return groups_.size(); }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  // Every parameter, groups in order (the index used in state names).
  std::vector<Tensor> params() const;

  // The optimizer's kind ("AdamW", "SGD"; also the prefix of its error messages) and its
  // hyperparameters shared by all groups (AdamW: beta1, beta2, eps; SGD: momentum, …): what a
  // checkpoint records and requires to match on load (per-group lr / weight decay are separate).
  const std::string& kind() const { return name_; }
  virtual std::map<std::string, double> fixed_hyperparameters() const = 0;

  // Copies of the per-parameter state (see the header comment for the names).
  StateList state() const;
  // The same tensors without copying them: the optimizer's own buffers, valid (and changed in place) until its next
  // step. What save_checkpoint writes from, so a checkpoint of a 100M-parameter model does not first copy 800 MB.
  virtual StateList state_view() const;
  // Restores state saved by state() of an optimizer of the same kind over parameters of the same
  // shapes and dtypes. Replaces all current state; a name it does not know is an error.
  virtual void load_state(const StateList& state);

  // A step in two halves for CUDA graphs (lm/trainer.cpp, `train --cuda-graph on`), where an optimizer has
  // them (AdamW): prepare_device_step() on the host, then step_from_device() queues device work that reads
  // its scalars from the device, so it can be captured once and replayed; device_runs_version() changes
  // when a captured step_from_device() is no longer valid. Without them (the default) a captured training
  // step runs the optimizer's step() eagerly after the graph; calling the halves throws.
  virtual bool has_device_step() const { return false; }
  virtual void prepare_device_step();
  virtual void step_from_device();
  virtual uint64_t device_runs_version() const { return 0; }

 protected:
  // `name` prefixes error messages ("AdamW", "SGD"). Groups' unset lr / weight decay take the
  // defaults. Checks every parameter (defined, leaf, requires grad, float, listed once).
  Optimizer(std::string name, std::vector<ParamGroup> groups, double default_lr, double default_weight_decay);

  // The names of the buffers each parameter's state holds, in order (e.g. {"step", "exp_avg"}).
  virtual std::vector<std::string> state_buffers() const = 0;
  // Checks one parameter's restored state (complete, shapes and dtypes matching `param`); throws
  // tapegrad::Error naming parameter i otherwise. An empty map (no update yet) is always valid.
  virtual void validate_state(size_t i, const Tensor& param, const std::map<std::string, Tensor>& state) const = 0;

  // State of the parameter with flat index i: buffer name → tensor (empty until its first update).
  std::map<std::string, Tensor>& param_state(size_t i) { return state_[i]; }

  // Calls f(flat index, param, grad, group) for every parameter with a defined gradient, after
  // checking that the gradient matches the parameter's shape, dtype and device.
  template <class F>
  void for_each_param_with_grad(F&& f) {
    size_t i = 0;
    for (ParamGroup& g : groups_) {
      for (Tensor& p : g.params) {
        Tensor grad = p.grad();
        if (grad.defined()) {
          check_grad(i, p, grad);
          f(i, p, grad, static_cast<const ParamGroup&>(g));
        }
        ++i;
      }
    }
  }

  const std::string& name() const { return name_; }

 private:
  void check_grad(size_t i, const Tensor& p, const Tensor& grad) const;

  std::string name_;
  std::vector<ParamGroup> groups_;              // lr and weight_decay always set after construction
  std::vector<double> initial_lr_;              // one per group
  std::vector<std::map<std::string, Tensor>> state_;  // one per parameter (flat index)
};

// Shared argument checks, tapegrad::Error on failure ("<who>: <what> must be ... but is ...").
void check_lr(const std::string& who, double lr);
void check_nonnegative(const std::string& who, const char* what, double value);
void check_beta(const std::string& who, const char* what, double beta);  // in [0, 1)
// A state name "<i>.<buffer>" (Optimizer::state()) split into i and buffer; false when it has no such form
// (no dot, an index that is empty, not decimal digits, or longer than 18 digits).
bool split_state_name(const std::string& name, size_t& index, std::string& buffer);
// A plain parameter list as one group (the optimizers' list constructors).
std::vector<ParamGroup> single_group(std::vector<Tensor> params);

}  // namespace tapegrad::optim

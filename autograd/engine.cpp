// engine.cpp — recording (attach, SavedTensor) and replaying the tape (backward).
//
// backward(root):
//   1. collect the tape entries reachable from root.grad_fn (each once);
//   2. sort them by sequence number, newest first — the tape, replayed in reverse. An entry
//      always comes after the entries of its inputs, so by the time it runs, every consumer
//      of its output has already added its gradient contribution into the entry's `pending_`;
//   3. for each entry: run its backward on the gathered gradient, undo broadcasting once
//      (sum_to the input's shape), and accumulate into the input's entry or leaf .grad;
//      then, unless retain_graph, free what it saved (a backward function can ask which it will be:
//      backward_pass.h — cross_entropy then writes its gradient over the logits it saved);
//   4. under RetainValuesGuard, each entry also keeps the gradient it received and the one it
//      passed to each input (Node::retained_grad, retained_input_grads; graph.h draws them);
//   5. leaves watched by a GradReadyHook (grad_hooks.h): step 1 counts the edges into each, step 3
//      counts them down as entries run (or are skipped), and at zero the leaf's gradient is final.
// Runs with grad mode off: backward functions call ordinary ops, which then record nothing.
#include <algorithm>
#include <cmath>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "autograd/backward_pass.h"
#include "autograd/grad_hooks.h"
#include "autograd/node.h"
#include "autograd/ops/op_util.h"

namespace tapegrad {

SavedTensor::SavedTensor(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  // An op's own output refers to the op's entry through grad_fn: store it detached to avoid a
  // cycle. Inputs are stored as they are (no allocation), their history is owned anyway.
  t_ = is_output ? t.detach() : t;
  version_ = t.storage()->version();
}

const Tensor& SavedTensor::get() const {
  if (t_.defined() && t_.storage()->version() != version_)
    throw Error(fmt::format(
        "a tensor of shape {} saved for backward was modified in place (storage version {} now, {} when saved)",
        t_.shape(), t_.storage()->version(), version_));
  return t_;
}

// Frees a chain of entries iteratively: an entry whose input entries are owned by nobody else
// hands them to a local stack instead of destroying them recursively (a chain of a million ops
// would otherwise recurse a million frames deep). A LambdaNode's saved tensors are destroyed
// before this body runs, so the edges are then the inputs' only owners.
Node::~Node() {
  std::vector<std::shared_ptr<Node>> stack;
  auto take_inputs = [&stack](Node& n) {
    for (Edge& e : n.edges_)
      if (e.node && e.node.use_count() == 1) stack.push_back(std::move(e.node));
  };
  take_inputs(*this);
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    if (n.use_count() == 1) {
      n->release();  // drop saved tensors first: they may own further entries
      take_inputs(*n);
    }
  }
}

namespace {
const Tensor kNotRetained;
}  // namespace

const Tensor& Node::retained_value() const { return retained_ ? retained_->value : kNotRetained; }
const Tensor& Node::retained_grad() const { return retained_ ? retained_->grad : kNotRetained; }
std::span<const Tensor> Node::retained_input_grads() const {
  return retained_ ? std::span<const Tensor>(retained_->input_grads) : std::span<const Tensor>();
}
std::span<const Tensor> Node::retained_input_values() const {
  return retained_ ? std::span<const Tensor>(retained_->input_values) : std::span<const Tensor>();
}
Node::Retained& Node::retained() {
  if (!retained_) retained_ = std::make_unique<Retained>();
  return *retained_;
}

namespace {

// Anomaly mode: true when every value of a floating-point tensor is finite (other dtypes always are).
bool all_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return true;
  Tensor c = t.detach().to(kCPU).contiguous();
  if (c.dtype() == kBFloat16) c = c.to(kFloat32);  // exact
  const int64_t n = c.numel();
  if (c.dtype() == kFloat32) {
    const float* p = c.data<float>();
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) return false;
  } else {
    const double* p = c.data<double>();
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i])) return false;
  }
  return true;
}

// "matmul (tape entry #12; inputs [4, 3], [3]; output [4])"
std::string describe_entry(const Node& n) {
  std::string ins;
  for (const Edge& e : n.inputs()) ins += fmt::format("{}{}", ins.empty() ? "" : ", ", e.shape);
  return fmt::format("'{}' (tape entry #{}; inputs {}; output {})", n.name(), n.seq(), ins, n.out_shape());
}

}  // namespace

void attach(Node& node, std::span<const Tensor* const> inputs, Tensor& out) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = *inputs[i];
    Edge& e = node.edges_[i];
    if (!in.defined()) continue;
    e.shape = in.shape();
    e.dtype = in.dtype();
    if (!in.requires_grad()) continue;
    if (in.grad_fn()) e.node = in.grad_fn();
    else e.leaf = in.impl();
  }
  node.out_shape_ = out.shape();
  node.out_dtype_ = out.dtype();
  if (RetainValuesMode::enabled()) {
    // Detached copies (no grad_fn): the entry must not own its output's history (a cycle).
    Node::Retained& r = node.retained();
    r.value = out.detach();
    r.input_values.assign(inputs.size(), Tensor());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]->defined() || node.edges_[i].needs_grad()) continue;
      r.input_values[i] = inputs[i]->detach();  // keeps the name
    }
  }
  out.impl()->requires_grad = true;
  TG_CHECK(!AnomalyMode::enabled() || all_finite(out), "anomaly detection: forward of {} produced a non-finite value",
           describe_entry(node));
}

namespace detail {

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  const int lead = g.dim() - shape.size();
  std::vector<int64_t> dims;
  for (int d = 0; d < g.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && g.shape()[d] != 1)) dims.push_back(d);
  Tensor r = dims.empty() ? g : sum(g, dims, /*keepdim=*/true);
  return r.reshape(shape);
}

}  // namespace detail

namespace {

// Whether the backward running on this thread keeps the graph (Engine::run sets it, restoring the outer value
// when it returns: a backward nested in a backward function sees its own). Outside any backward: true.
thread_local bool t_backward_retains_graph = true;

}  // namespace

namespace detail {

bool backward_retains_graph() { return t_backward_retains_graph; }

// True when t is the only handle on all of its storage (so it may be updated in place).
bool owns_storage(const Tensor& t) {
  return t.impl().use_count() == 1 && t.storage().use_count() == 1 && t.is_contiguous() && t.offset() == 0 &&
         static_cast<size_t>(t.numel()) * dtype_size(t.dtype()) == t.storage()->nbytes();
}

}  // namespace detail

namespace {

using detail::owns_storage;

// slot += g, in place when slot owns its buffer, otherwise out of place (slot may alias a
// gradient that another input also received, e.g. both inputs of an add). in_float32: a bfloat16 slot or
// g is widened first (Node::gathers_in_float32), so a sum of several bf16 gradients is formed in float32.
void accumulate(Tensor& slot, Tensor g, bool in_float32 = false) {
  if (!slot.defined()) {
    slot = std::move(g);
    return;
  }
  if (in_float32) {
    if (slot.dtype() == kBFloat16) slot = slot.to(kFloat32);  // exact; a new buffer of its own
    if (g.dtype() == kBFloat16) g = g.to(kFloat32);
  }
  if (owns_storage(slot)) {
    slot.add_(g);
  } else {
    slot = add(slot, g);
  }
}

void accumulate_into_leaf(TensorImpl& leaf, Tensor g) {
  if (!leaf.grad) {
    // The leaf's .grad must be a buffer of its own: steal g only if nobody else holds it.
    leaf.grad = owns_storage(g) ? g.impl() : clone(g).impl();
  } else {
    Tensor(leaf.grad).add_(g);
  }
}

}  // namespace

namespace {

// A bfloat16 input whose entry sums its gradients in float32: it may be handed float32 (GradInputs).
bool gathers_in_float32(const Edge& e) { return e.node && e.node->gathers_in_float32() && e.dtype == kBFloat16; }

}  // namespace

bool GradInputs::gathers_in_float32(size_t i) const { return tapegrad::gathers_in_float32(edges_[i]); }

Tensor GradInputs::take_gathered(size_t i) {
  const Edge& e = edges_[i];
  if (!e.node || RetainValuesMode::enabled()) return Tensor();
  Tensor& pending = e.node->pending_;
  const bool dtype_ok = pending.defined() &&
                        (pending.dtype() == e.dtype || (gathers_in_float32(i) && pending.dtype() == kFloat32));
  if (!dtype_ok || !owns_storage(pending) || pending.shape() != e.shape) return Tensor();
  Tensor gathered = std::move(pending);
  pending = Tensor();  // the engine receives the sum back through slot i
  return gathered;
}

namespace {

// The live GradReadyHooks (registered by their constructors, removed by their destructors).
std::mutex g_hooks_mutex;
std::vector<GradReadyHook*> g_hooks;

}  // namespace

GradReadyHook::GradReadyHook(std::vector<Tensor> leaves, std::function<void(size_t)> on_ready)
    : leaves_(std::move(leaves)), on_ready_(std::move(on_ready)) {
  for (size_t i = 0; i < leaves_.size(); ++i) {
    TG_CHECK(leaves_[i].defined() && leaves_[i].is_leaf() && leaves_[i].requires_grad(),
             "GradReadyHook: tensor {} is not a leaf that requires grad", i);
  }
  TG_CHECK(on_ready_ != nullptr, "GradReadyHook: the callback is empty");
  std::lock_guard lock(g_hooks_mutex);
  g_hooks.push_back(this);
}

GradReadyHook::~GradReadyHook() {
  std::lock_guard lock(g_hooks_mutex);
  std::erase(g_hooks, this);
}

namespace {

// One watched leaf in one backward: the edges still to run, and who to call when none are left.
struct LeafWatch {
  int64_t pending_edges = 0;
  std::vector<std::pair<GradReadyHook*, size_t>> callbacks;
};

}  // namespace

class Engine {
 public:
  static void run(const Tensor& root, const Tensor& grad, bool retain_graph);

 private:
  static void call(GradReadyHook& hook, size_t index) { hook.on_ready_(index); }
  // The watched leaves (by impl) with their callbacks; empty when no hook is registered.
  static std::unordered_map<const TensorImpl*, LeafWatch> watched_leaves() {
    std::unordered_map<const TensorImpl*, LeafWatch> watch;
    std::lock_guard lock(g_hooks_mutex);
    for (GradReadyHook* h : g_hooks)
      for (size_t i = 0; i < h->leaves_.size(); ++i) watch[h->leaves_[i].impl().get()].callbacks.emplace_back(h, i);
    return watch;
  }
  static void fire(LeafWatch& w) {
    for (auto& [hook, index] : w.callbacks) call(*hook, index);
  }
};

void Engine::run(const Tensor& root, const Tensor& grad_in, bool retain_graph) {
  TG_CHECK(root.defined(), "backward: the tensor is undefined");
  TG_CHECK(root.requires_grad(),
           "backward: the tensor (shape {}) does not require grad: no input of its computation requires grad, "
           "or it was computed under NoGradGuard",
           root.shape());
  Tensor grad = grad_in;
  if (!grad.defined()) {
    TG_CHECK(root.numel() == 1,
             "backward: a gradient can be implied only for a one-element output; this one has shape {} — pass a "
             "gradient of that shape",
             root.shape());
    grad = ones(root.shape(), root.options());
  } else {
    TG_CHECK(grad.shape() == root.shape() && grad.dtype() == root.dtype(),
             "backward: the gradient {} {} does not match the tensor {} {}", grad.shape(), grad.dtype(),
             root.shape(), root.dtype());
  }
  NoGradGuard no_grad;
  grad = grad.detach();
  struct RetainGraphScope {
    bool outer;
    explicit RetainGraphScope(bool retain) : outer(std::exchange(t_backward_retains_graph, retain)) {}
    ~RetainGraphScope() { t_backward_retains_graph = outer; }
    RetainGraphScope(const RetainGraphScope&) = delete;
    RetainGraphScope& operator=(const RetainGraphScope&) = delete;
  } retain_graph_scope(retain_graph);

  auto watch = watched_leaves();
  if (root.is_leaf()) {
    accumulate_into_leaf(*root.impl(), grad);
    if (auto it = watch.find(root.impl().get()); it != watch.end()) fire(it->second);
    return;
  }

  // 1. the reachable entries (iterative DFS; a mark per traversal instead of a set)
  static std::atomic<uint64_t> traversal{1};
  const uint64_t mark = traversal.fetch_add(1);
  std::vector<Node*> order, stack{root.grad_fn().get()};
  root.grad_fn()->mark_ = mark;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    order.push_back(n);
    for (const Edge& e : n->edges_) {
      if (e.node && e.node->mark_ != mark) {
        e.node->mark_ = mark;
        stack.push_back(e.node.get());
      }
      if (e.leaf && !watch.empty())
        if (auto it = watch.find(e.leaf.get()); it != watch.end()) ++it->second.pending_edges;
    }
  }
  // An entry's edges into watched leaves are done (run or skipped): a leaf with none left is final.
  auto edges_done = [&](const Node& n) {
    if (watch.empty()) return;
    for (const Edge& e : n.edges_)
      if (e.leaf)
        if (auto it = watch.find(e.leaf.get()); it != watch.end() && --it->second.pending_edges == 0) fire(it->second);
  };
  // 2. the tape in reverse
  std::sort(order.begin(), order.end(), [](const Node* a, const Node* b) { return a->seq_ > b->seq_; });

  // 3. replay. If a backward throws, drop the partial gradients gathered so far: a later backward
  // through the same (retained) entries must not add them to its own.
  struct ClearPendingOnError {
    const std::vector<Node*>& nodes;
    bool armed = true;
    ~ClearPendingOnError() {
      if (armed)
        for (Node* m : nodes) m->pending_ = Tensor();
    }
  } clear_on_error{order};
  root.grad_fn()->pending_ = grad;
  // Retained gradients share buffers with the ones in flight; that is safe because accumulate()
  // and accumulate_into_leaf() only write in place into a tensor nobody else holds.
  const bool retain = RetainValuesMode::enabled();
  for (Node* n : order) {
    Tensor g = std::move(n->pending_);
    n->pending_ = Tensor();
    if (!g.defined()) {
      edges_done(*n);
      continue;
    }
    TG_CHECK(!n->released_,
             "backward: the tape entry '{}' (#{}) already ran backward and freed what it saved; call backward with "
             "retain_graph=true the first time to run it twice",
             n->name_, n->seq_);
    if (retain) {
      Node::Retained& r = n->retained();
      r.grad = g;
      r.input_grads.assign(n->edges_.size(), Tensor());
    }
    GradInputs grads(n->edges_);
    try {
      n->backward(g, grads);
    } catch (const Error& e) {
      throw Error(fmt::format("backward of '{}' (tape entry #{}): {}", n->name_, n->seq_, e.what()));
    }
    // Dropped before the inputs' gradients are passed on: a backward that hands g on as it is, or as a view
    // (to() of its own dtype, transpose, reshape), then passes a buffer nobody else holds, which the next
    // entry or leaf takes over instead of copying (accumulate, accumulate_into_leaf).
    g = Tensor();
    if (!retain_graph) {
      n->release();
      n->released_ = true;
    }
    for (size_t i = 0; i < n->edges_.size(); ++i) {
      const Edge& e = n->edges_[i];
      if (!e.needs_grad() || !grads[i].defined()) continue;
      TG_CHECK(!AnomalyMode::enabled() || all_finite(grads[i]),
               "anomaly detection: backward of {} produced a non-finite gradient for input {}", describe_entry(*n), i);
      // moved out of its slot, so a gradient nobody else holds can be stolen instead of copied
      Tensor gi = std::move(grads[i]);
      if (gi.shape() != e.shape) gi = detail::sum_to(gi, e.shape);
      // A float32 gradient for a bfloat16 input whose entry gathers in float32 stays float32 (GradInputs).
      const bool keep_float32 = gi.dtype() == kFloat32 && gathers_in_float32(e);
      if (gi.dtype() != e.dtype && !keep_float32) gi = gi.to(e.dtype);
      if (retain) n->retained_->input_grads[i] = gi;
      if (e.node) accumulate(e.node->pending_, std::move(gi), e.node->gathers_in_float32_);
      else accumulate_into_leaf(*e.leaf, std::move(gi));
    }
    edges_done(*n);
  }
  clear_on_error.armed = false;
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const { Engine::run(*this, grad, retain_graph); }

}  // namespace tapegrad

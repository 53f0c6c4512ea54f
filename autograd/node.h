// node.h — one entry of the tape: what an op recorded so that backward can run.
//
// An op that runs with grad mode on and an input that requires grad calls record(), which
// stores a Node holding
//   * a sequence number (the entry's position on the tape, in recording order),
//   * one Edge per input: the input's own entry (non-leaf), or the leaf whose .grad to
//     accumulate into, or nothing (the input needs no gradient → its gradient is never computed),
//   * the backward function — a lambda written right under the op's forward, capturing what it
//     saved (SavedTensor).
// The output tensor owns its Node and each Node owns its inputs' Nodes, so a graph nobody
// refers to anymore frees itself; backward() replays the entries reachable from its root in
// decreasing sequence order (see engine.cpp).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/inline_vector.h"
#include "autograd/pool.h"
#include "autograd/tensor.h"

namespace tapegrad {

struct Edge {
  std::shared_ptr<Node> node;        // the input's tape entry (input is a non-leaf), or
  std::shared_ptr<TensorImpl> leaf;  // the leaf whose .grad accumulates, or neither (no grad needed)
  Shape shape;                       // the input's shape: broadcasting is undone against it
  DType dtype = kFloat32;
  bool needs_grad() const { return node || leaf; }
};

// The gradients a backward function produces, one slot per input. A slot left undefined means
// "zero". Slots of inputs that need no gradient are ignored: check needs(i) to skip the work.
class GradInputs {
 public:
  explicit GradInputs(std::span<const Edge> edges) : edges_(edges), grads_(edges.size()) {}
  bool needs(size_t i) const { return edges_[i].needs_grad(); }
  Tensor& operator[](size_t i) { return grads_[i]; }
  size_t size() const { return grads_.size(); }
  // The gradient gathered so far for input i's own tape entry (from the consumers recorded after this one: they
  // have all run), handed over so that this backward adds its contribution into it in place; slot i must then
  // receive the sum (which the engine passes on as the whole gathered gradient). Undefined — nothing handed
  // over — when input i is a leaf or needs no gradient, nothing was gathered yet, the buffer is shared, or
  // every entry keeps the gradients it passed (RetainValuesGuard). Saves one pass: RMSNorm's dx lands on the
  // residual stream's gradient without a separate add (autograd/ops/fused.cpp: add_rms_norm), a matmul's dX is
  // added by the GEMM itself (beta = 1: autograd/ops/matmul.cpp). When the entry gathers in float32 (below) the
  // buffer of a bfloat16 input may be float32.
  Tensor take_gathered(size_t i);
  // Whether input i's entry sums bfloat16 gradients in float32 (Node::gathers_in_float32): a backward may then
  // hand it a float32 gradient for that bfloat16 input, and the engine passes it on unrounded.
  bool gathers_in_float32(size_t i) const;

 private:
  std::span<const Edge> edges_;
  InlineVector<Tensor, 3> grads_;
};

class Node {
 public:
  Node(const char* name, size_t n_inputs)
      : name_(name), seq_(next_seq_.fetch_add(1, std::memory_order_relaxed)), edges_(n_inputs) {}
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const char* name() const { return name_; }
  uint64_t seq() const { return seq_; }
  std::span<const Edge> inputs() const { return edges_; }
  std::span<Edge> inputs() { return edges_; }
  const Shape& out_shape() const { return out_shape_; }
  DType out_dtype() const { return out_dtype_; }
  bool released() const { return released_; }
  // Whether bfloat16 gradients arriving from several consumers are summed in float32 (then this entry's
  // backward receives float32; a single one arrives as it is, bfloat16 or — when its consumer wrote it so,
  // GradInputs::gathers_in_float32 — float32). Set by ops whose backward widens its incoming gradient anyway
  // (add_rms_norm's norm, a float32 → bfloat16 cast), so that a bf16 output read by several bf16 matmuls
  // gathers their gradients as precisely as float32 copies of it would.
  bool gathers_in_float32() const { return gathers_in_float32_; }
  void set_gathers_in_float32(bool on) { gathers_in_float32_ = on; }

  // What RetainValuesGuard (autograd/graph.h) kept; each is undefined (or empty) when not kept.
  //   retained_value():       the output's value when the entry was recorded (detached: no history)
  //   retained_grad():        dL/d(output): everything backward gathered for this entry before running it
  //   retained_input_grads(): per input slot, the gradient this entry passed to that input — its
  //                           contribution, already summed to the input's shape (broadcasting undone);
  //                           undefined for an input that needs no gradient or received zero
  //   retained_input_values(): per input slot, the value of a constant input (an Edge with neither
  //                           node nor leaf); undefined for the others (their values live in their
  //                           own entry or leaf)
  // They are released with the entry.
  const Tensor& retained_value() const;
  const Tensor& retained_grad() const;
  std::span<const Tensor> retained_input_grads() const;
  std::span<const Tensor> retained_input_values() const;

  // Computes the inputs' gradients from the output's gradient g.
  virtual void backward(const Tensor& g, GradInputs& grads) = 0;
  // Frees what the backward saved (after it ran, unless retain_graph).
  virtual void release() = 0;

 private:
  friend class Engine;
  friend class GradInputs;
  template <class F>
  friend void record(const char*, std::initializer_list<const Tensor*>, Tensor&, F&&);
  template <class F>
  friend void record(const char*, const std::vector<Tensor>&, Tensor&, F&&);
  friend void attach(Node&, std::span<const Tensor* const>, Tensor&);

  // Allocated only under RetainValuesGuard: the off path stores one null pointer per entry.
  struct Retained {
    Tensor value, grad;
    std::vector<Tensor> input_grads, input_values;  // one slot per input, or empty
  };
  Retained& retained();  // creates it on first use

  const char* name_;
  uint64_t seq_;
  InlineVector<Edge, 3> edges_;
  Shape out_shape_;
  DType out_dtype_ = kFloat32;
  bool released_ = false;
  bool gathers_in_float32_ = false;
  std::unique_ptr<Retained> retained_;
  // engine scratch: the gradient gathered so far for this entry's output, and a visit mark
  Tensor pending_;
  uint64_t mark_ = 0;
  static inline std::atomic<uint64_t> next_seq_{1};
};

template <class F>
class LambdaNode final : public Node {
 public:
  LambdaNode(const char* name, size_t n, F&& fn) : Node(name, n), fn_(std::forward<F>(fn)) {}
  void backward(const Tensor& g, GradInputs& grads) override { (*fn_)(g, grads); }
  void release() override { fn_.reset(); }

 private:
  std::optional<std::decay_t<F>> fn_;
};

// A tensor kept for backward. Keeps its data (not its history: saving an op's own output
// through its history would make a reference cycle) and the storage version it saw; get()
// throws if the tensor was modified in place since.
class SavedTensor {
 public:
  SavedTensor() = default;
  // is_output: the tensor is the recording op's own output (stored detached).
  explicit SavedTensor(const Tensor& t, bool is_output = false);
  const Tensor& get() const;

 private:
  Tensor t_;
  uint64_t version_ = 0;
};

// True when an op on these inputs must record (grad mode on and some input requires grad).
inline bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!GradMode::enabled()) return false;
  for (const Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}
inline bool needs_grad(const Tensor& a) { return GradMode::enabled() && a.requires_grad(); }
inline bool needs_grad(const Tensor& a, const Tensor& b) {
  return GradMode::enabled() && (a.requires_grad() || b.requires_grad());
}

// Links a new node to its inputs and makes it the output's grad_fn.
void attach(Node& node, std::span<const Tensor* const> inputs, Tensor& out);

// Records one tape entry for `out` = name(inputs...), with backward fn(g, grads).
template <class F>
void record(const char* name, std::initializer_list<const Tensor*> inputs, Tensor& out, F&& fn) {
  auto node = detail::make_pooled<LambdaNode<F>>(name, inputs.size(), std::forward<F>(fn));
  attach(*node, std::span<const Tensor* const>(inputs.begin(), inputs.size()), out);
  out.impl()->grad_fn = std::move(node);
}
template <class F>
void record(const char* name, const std::vector<Tensor>& inputs, Tensor& out, F&& fn) {
  std::vector<const Tensor*> ptrs;
  ptrs.reserve(inputs.size());
  for (const Tensor& t : inputs) ptrs.push_back(&t);
  auto node = detail::make_pooled<LambdaNode<F>>(name, inputs.size(), std::forward<F>(fn));
  attach(*node, ptrs, out);
  out.impl()->grad_fn = std::move(node);
}

}  // namespace tapegrad

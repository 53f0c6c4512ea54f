// tape_steps.h — the tape in a form a learner can walk by hand: its entries in recording order, each
// with its inputs, its output and its backward as a callable. With it you can write backward() yourself
// (docs/learn/02b_write_backward.md; docs/graph.md, "Walking the tape yourself"):
//
//   std::vector<TapeStep> steps = tape_steps(loss);
//   std::map<std::string, Tensor> grad;             // d loss/d(value), by the value's name ("#3", "w")
//   for (const TapeStep& s : steps)
//     for (const TapeValue& in : s.inputs)
//       if (in.needs_grad) grad[in.name] = zeros(in.shape, in.dtype);
//   grad[steps.back().output.name] = ones(loss.shape(), loss.options());
//   for (const TapeStep& s : std::views::reverse(steps)) {                  // newest step first
//     std::vector<Tensor> local = s.local_backward(grad[s.output.name]);   // one share per input
//     for (size_t i = 0; i < s.inputs.size(); ++i)
//       if (s.inputs[i].needs_grad) grad[s.inputs[i].name] = grad[s.inputs[i].name] + local[i];  // +=
//   }
//
// This is what Tensor::backward does (autograd/engine.cpp), without its memory savings. Meant for small
// graphs: the steps keep the graph alive, and local_backward hands back fresh buffers.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

// One value on the tape: a step's output, a leaf, or a constant.
struct TapeValue {
  // "#3" for the output of tape entry #3 (as tape_string names it); a leaf's name ("x1"), or "leaf0",
  // "leaf1", … for unnamed leaves (a second leaf with a name already taken gets "x1~2"); "const" for an
  // input that needs no gradient. Equal names mean the same value: key your gradients by it.
  std::string name;
  Shape shape;
  DType dtype = kFloat32;
  bool needs_grad = false;  // false only for constants: a step passes them no gradient
  // Its value, detached (never records): a leaf's always; a step's output or a constant's when the graph
  // was recorded under RetainValuesGuard (autograd/graph.h), else undefined.
  Tensor value;
};

// One entry of the tape.
struct TapeStep {
  std::string op;   // the op that recorded it: "mul", "add", "tanh", "matmul", "sum", …
  uint64_t seq = 0; // its number on the tape (#seq); steps come oldest first
  TapeValue output;
  std::vector<TapeValue> inputs;
  // The entry's own backward: given d root/d(output) (output's shape and dtype), the share of the
  // gradient it passes to each input — one tensor per input, in the input's shape and dtype (broadcasting
  // already undone by summing), zeros where the input gets nothing, undefined for a constant. Nothing is
  // accumulated anywhere: adding the shares up is the caller's job. Each call hands back fresh buffers.
  // Throws tapegrad::Error for a gradient of the wrong shape or dtype, and once a backward() without
  // retain_graph has run through the entry (it freed what the entry saved).
  std::function<std::vector<Tensor>(const Tensor& grad_output)> local_backward;
};

// The tape entries reachable from root, oldest first (the order tape_string lists them in): the last
// step computed root. Empty when root is a leaf. The steps keep root's graph alive while they live.
std::vector<TapeStep> tape_steps(const Tensor& root);

}  // namespace tapegrad

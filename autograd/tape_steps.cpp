// tape_steps.cpp — tape_steps(root): the reachable tape entries as TapeSteps, each entry's backward
// wrapped as a callable that returns the inputs' gradients instead of accumulating them.
#include "autograd/tape_steps.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/op_util.h"
#include "kernels/error.h"

namespace tapegrad {

namespace {

// The entries reachable from root, oldest first, owned (the steps' callables keep them alive).
std::vector<std::shared_ptr<Node>> reachable(const Tensor& root) {
  std::vector<std::shared_ptr<Node>> out, stack;
  std::set<const Node*> seen;
  if (root.defined() && root.grad_fn()) {
    stack.push_back(root.grad_fn());
    seen.insert(root.grad_fn().get());
  }
  while (!stack.empty()) {
    std::shared_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    for (const Edge& e : n->inputs())
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node);
    out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->seq() < b->seq(); });
  return out;
}

// Leaf names as tape_string gives them: the leaf's own name, or leafN for unnamed ones (N counting
// unnamed leaves in the order they are met); a name another leaf already has gets "~2", "~3", ….
class LeafNames {
 public:
  std::string operator()(const TensorImpl* leaf) {
    if (auto it = names_.find(leaf); it != names_.end()) return it->second;
    std::string name = leaf->name.empty() ? fmt::format("leaf{}", unnamed_++) : leaf->name;
    if (!leaf->name.empty() && !taken_.insert(name).second) {
      int k = 2;
      while (!taken_.insert(fmt::format("{}~{}", leaf->name, k)).second) ++k;
      name = fmt::format("{}~{}", leaf->name, k);
    }
    names_.emplace(leaf, name);
    return name;
  }

 private:
  std::map<const TensorImpl*, std::string> names_;
  std::set<std::string> taken_;
  int unnamed_ = 0;
};

std::string step_label(const Node& n) { return fmt::format("#{} {}", n.seq(), n.name()); }

// Runs the entry's backward on g and returns each input's share: summed to the input's shape, in its
// dtype, zeros where the backward left a slot empty, undefined for a constant; never a buffer shared
// with g or with another share (the caller may update them in place).
std::vector<Tensor> run_local_backward(Node& node, const Tensor& g) {
  TG_CHECK(!node.released(),
           "local_backward of tape step {}: a backward() without retain_graph already ran through this step and "
           "freed what it saved; call local_backward first, or backward(Tensor(), /*retain_graph=*/true)",
           step_label(node));
  TG_CHECK(g.defined(), "local_backward of tape step {}: the gradient is undefined (pass zeros for none)",
           step_label(node));
  TG_CHECK(g.shape() == node.out_shape() && g.dtype() == node.out_dtype(),
           "local_backward of tape step {}: the gradient is {} {}, but the step's output is {} {}", step_label(node),
           g.shape(), g.dtype(), node.out_shape(), node.out_dtype());
  NoGradGuard no_grad;  // the backward functions call ordinary ops: record nothing
  const Tensor grad_out = g.detach();
  GradInputs grads(node.inputs());
  try {
    node.backward(grad_out, grads);
  } catch (const Error& e) {
    throw Error(fmt::format("local_backward of tape step {}: {}", step_label(node), e.what()));
  }
  const auto edges = node.inputs();
  std::vector<Tensor> shares(edges.size());
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if (!e.needs_grad()) continue;
    Tensor s = grads[i];
    if (!s.defined()) {
      shares[i] = zeros(e.shape, Options(e.dtype).device(grad_out.device()));
      continue;
    }
    if (s.shape() != e.shape) s = detail::sum_to(s, e.shape);
    if (s.dtype() != e.dtype) s = s.to(e.dtype);
    bool shared = s.storage() == grad_out.storage();
    for (size_t j = 0; j < i && !shared; ++j) shared = shares[j].defined() && shares[j].storage() == s.storage();
    shares[i] = shared ? s.clone() : s;
  }
  return shares;
}

}  // namespace

std::vector<TapeStep> tape_steps(const Tensor& root) {
  std::vector<TapeStep> steps;
  LeafNames leaf_name;
  std::map<const Node*, const TapeValue*> outputs;  // each entry's output, for the steps that read it
  const std::vector<std::shared_ptr<Node>> nodes = reachable(root);
  steps.reserve(nodes.size());  // no reallocation: `outputs` points into it
  for (const std::shared_ptr<Node>& n : nodes) {
    TapeStep& step = steps.emplace_back();
    step.op = n->name();
    step.seq = n->seq();
    step.output = TapeValue{fmt::format("#{}", n->seq()), n->out_shape(), n->out_dtype(), true, n->retained_value()};
    const auto edges = n->inputs();
    const auto kept_constants = n->retained_input_values();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (e.node) {
        step.inputs.push_back(*outputs.at(e.node.get()));
      } else if (e.leaf) {
        step.inputs.push_back(TapeValue{leaf_name(e.leaf.get()), e.shape, e.dtype, true, Tensor(e.leaf).detach()});
      } else {
        const Tensor kept = i < kept_constants.size() ? kept_constants[i] : Tensor();
        step.inputs.push_back(TapeValue{"const", e.shape, e.dtype, false, kept});
      }
    }
    step.local_backward = [node = n](const Tensor& g) { return run_local_backward(*node, g); };
    outputs[n.get()] = &step.output;
  }
  return steps;
}

}  // namespace tapegrad

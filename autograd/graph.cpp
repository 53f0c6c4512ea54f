// graph.cpp — tape_string and to_dot: walk the entries reachable from a root, list them in
// sequence order.
#include "autograd/graph.h"

#include <algorithm>
#include <map>
#include <set>

#include "autograd/node.h"

namespace tapegrad {

namespace {

std::vector<const Node*> reachable(const Tensor& root) {
  std::vector<const Node*> out, stack;
  std::set<const Node*> seen;
  if (root.defined() && root.grad_fn()) stack.push_back(root.grad_fn().get()), seen.insert(root.grad_fn().get());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    out.push_back(n);
    for (const Edge& e : n->inputs())
      if (e.node && seen.insert(e.node.get()).second) stack.push_back(e.node.get());
  }
  std::sort(out.begin(), out.end(), [](const Node* a, const Node* b) { return a->seq() < b->seq(); });
  return out;
}

}  // namespace

std::vector<const Node*> tape_entries(const Tensor& root) { return reachable(root); }

namespace {

std::string leaf_label(const TensorImpl& t, std::map<const TensorImpl*, int>& ids) {
  if (!t.name.empty()) return t.name;
  auto [it, inserted] = ids.emplace(&t, static_cast<int>(ids.size()));
  return fmt::format("leaf{}", it->second);
}

std::string escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

}  // namespace

std::string tape_string(const Tensor& root) {
  if (!root.defined()) return "tape: (undefined tensor)\n";
  if (!root.grad_fn())
    return fmt::format("tape: empty — the tensor {} is a leaf{}\n", root.shape(),
                       root.requires_grad() ? " that requires grad" : " (no grad)");
  const auto nodes = reachable(root);
  std::map<const TensorImpl*, int> leaf_ids;
  std::string s = fmt::format("tape: {} entries (backward replays them from the bottom up)\n", nodes.size());
  for (const Node* n : nodes) {
    std::string args;
    for (const Edge& e : n->inputs()) {
      if (!args.empty()) args += ", ";
      if (e.node) args += fmt::format("#{}", e.node->seq());
      else if (e.leaf) args += fmt::format("{} {}", leaf_label(*e.leaf, leaf_ids), e.shape);
      else args += fmt::format("const {}", e.shape);
    }
    s += fmt::format("  #{:<5} {}({}) -> {} {}{}\n", n->seq(), n->name(), args, n->out_shape(), n->out_dtype(),
                     n->released() ? "  [saved tensors freed]" : "");
  }
  return s;
}

std::string to_dot(const Tensor& root) {
  std::string s = "digraph tape {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  if (!root.defined()) return s + "}\n";
  std::map<const TensorImpl*, int> leaf_ids;
  std::set<const TensorImpl*> leaves_drawn;
  int consts = 0;
  if (!root.grad_fn()) {
    s += fmt::format("  leaf [shape=box, label=\"{}\\n{}\"];\n}}\n", escape(leaf_label(*root.impl(), leaf_ids)),
                     root.shape().str());
    return s;
  }
  for (const Node* n : reachable(root)) {
    const std::string id = fmt::format("op{}", n->seq());
    s += fmt::format("  {} [shape=ellipse, style=filled, fillcolor=\"#dae8fc\", label=\"#{} {}\\n{} {}\"];\n", id,
                     n->seq(), n->name(), n->out_shape().str(), dtype_name(n->out_dtype()));
    for (const Edge& e : n->inputs()) {
      std::string from;
      if (e.node) {
        from = fmt::format("op{}", e.node->seq());
      } else if (e.leaf) {
        from = fmt::format("leaf_{}", static_cast<const void*>(e.leaf.get()));
        from.erase(std::remove_if(from.begin(), from.end(), [](char c) { return !std::isalnum(c) && c != '_'; }),
                   from.end());
        if (leaves_drawn.insert(e.leaf.get()).second)
          s += fmt::format(
              "  {} [shape=box, style=filled, fillcolor=\"#d5e8d4\", label=\"{}\\n{} {}\\nrequires_grad\"];\n", from,
              escape(leaf_label(*e.leaf, leaf_ids)), e.shape.str(), dtype_name(e.dtype));
      } else {
        from = fmt::format("const{}", consts++);
        s += fmt::format("  {} [shape=box, style=filled, fillcolor=\"#eeeeee\", label=\"const\\n{} {}\"];\n", from,
                         e.shape.str(), dtype_name(e.dtype));
      }
      s += fmt::format("  {} -> {} [label=\"{}\"];\n", from, id, e.shape.str());
    }
  }
  s += fmt::format(
      "  grad [shape=plaintext, label=\"backward starts here:\\ndL/d(#{}) = 1\"];\n  grad -> op{} [style=dashed, "
      "color=red];\n}}\n",
      root.grad_fn()->seq(), root.grad_fn()->seq());
  return s;
}

}  // namespace tapegrad

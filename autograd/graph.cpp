// graph.cpp — tape_string and to_dot (with values and gradients when asked): walk the entries
// reachable from a root, list them in sequence order. The HTML stepper is in graph_html.cpp.
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

namespace {

// Reads any tensor's elements as doubles (copied to the CPU and made contiguous first).
std::vector<double> read_as_doubles(const Tensor& t) {
  const Tensor c = t.detach().to(kCPU).contiguous();
  const int64_t n = c.numel();
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (c.dtype()) {
      case kFloat32: v[i] = c.data<float>()[i]; break;
      case kFloat64: v[i] = c.data<double>()[i]; break;
      case kInt32: v[i] = c.data<int32_t>()[i]; break;
      case kInt64: v[i] = static_cast<double>(c.data<int64_t>()[i]); break;
      case kBool: v[i] = c.data<bool>()[i] ? 1 : 0; break;
      case kBFloat16: v[i] = c.data<bfloat16>()[i]; break;
    }
  }
  return v;
}

std::string format_number(double x, bool integral) {
  if (integral) return fmt::format("{}", static_cast<int64_t>(x));
  return fmt::format("{:.4g}", x);
}

// DOT label text: quotes and backslashes escaped, one "\n" per line break.
std::string dot_lines(const std::string& prefix, const std::vector<std::string>& lines) {
  std::string s;
  for (size_t i = 0; i < lines.size(); ++i)
    s += (i == 0 ? prefix : std::string(prefix.size(), ' ')) + escape(lines[i]) + "\\l";
  return s;
}

// The "data …" / "grad …" part of a node's label ("" when the option is off). Lines are
// left-justified (\l) so the rows of a matrix line up.
std::string value_part(const Tensor& value, const Tensor& grad, bool has_grad, const DotOptions& o) {
  std::string s;
  if (o.values && value.defined()) s += "\\n" + dot_lines("data ", value_lines(value, o.max_elements));
  if (o.grads && has_grad) s += (s.empty() ? "\\n" : "") + dot_lines("grad ", value_lines(grad, o.max_elements));
  return s;
}

}  // namespace

std::vector<std::string> value_lines(const Tensor& t, int64_t max_elements) {
  if (!t.defined()) return {"(none)"};
  const bool integral = !is_floating(t.dtype());
  const std::vector<double> v = read_as_doubles(t);
  const int64_t n = t.numel();
  if (n > max_elements) {
    double lo = v[0], hi = v[0], sum = 0;
    for (double x : v) lo = std::min(lo, x), hi = std::max(hi, x), sum += x;
    return {fmt::format("{} min {} mean {:.4g} max {}", t.shape().str(), format_number(lo, integral), sum / n,
                        format_number(hi, integral))};
  }
  const int rank = t.dim();
  if (rank == 0) return {format_number(v[0], integral)};
  if (n == 0) return {std::string(rank, '[') + std::string(rank, ']')};
  // One line per row of the last dimension, with numpy's brackets: a row opens as many brackets
  // as leading indices it starts (all trailing ones zero) and closes as many as it ends.
  const int64_t row = t.shape()[rank - 1];
  std::vector<std::string> lines;
  for (int64_t r = 0; r * row < n; ++r) {
    int opens = 1, closes = 1;
    int64_t block = row;
    for (int d = rank - 2; d >= 0; --d) {
      block *= t.shape()[d];
      if ((r * row) % block == 0) ++opens;
      if (((r + 1) * row) % block == 0) ++closes;
    }
    std::string line = std::string(rank - opens, ' ') + std::string(opens, '[');
    for (int64_t i = 0; i < row; ++i) line += (i ? ", " : "") + format_number(v[r * row + i], integral);
    line += std::string(closes, ']');
    if ((r + 1) * row < n) line += ',';
    lines.push_back(std::move(line));
  }
  // a short matrix reads better on one line: "[[1, 2], [3, 4]]"
  std::string one_line;
  for (const std::string& l : lines) {
    if (!one_line.empty()) one_line += ' ';
    one_line.append(l, l.find('['));
  }
  if (lines.size() > 1 && one_line.size() <= 60) return {one_line};
  return lines;
}

std::string to_dot(const Tensor& root, const DotOptions& options) {
  const bool show = options.values || options.grads;
  // With numbers in the labels the nodes get wide: the graph then runs top to bottom, ops as boxes.
  std::string s = fmt::format("digraph tape {{\n  rankdir={};\n  node [fontname=\"Helvetica\", fontsize=10];\n{}",
                              show ? "TB" : "LR", show ? "  edge [fontname=\"Helvetica\", fontsize=9];\n" : "");
  const char* op_shape = show ? "box, style=\"rounded,filled\"" : "ellipse, style=filled";
  if (!root.defined()) return s + "}\n";
  std::map<const TensorImpl*, int> leaf_ids;
  std::set<const TensorImpl*> leaves_drawn;
  int consts = 0;
  if (!root.grad_fn()) {
    const TensorImpl& t = *root.impl();
    s += fmt::format("  leaf [shape=box, label=\"{}\\n{}{}\"];\n}}\n", escape(leaf_label(t, leaf_ids)),
                     root.shape().str(), show ? value_part(root, root.grad(), t.grad != nullptr, options) : "");
    return s;
  }
  for (const Node* n : reachable(root)) {
    const std::string id = fmt::format("op{}", n->seq());
    s += fmt::format("  {} [shape={}, fillcolor=\"#dae8fc\", label=\"#{} {}\\n{} {}{}\"];\n", id, op_shape,
                     n->seq(), n->name(), n->out_shape().str(), dtype_name(n->out_dtype()),
                     show ? value_part(n->retained_value(), n->retained_grad(), n->retained_grad().defined(), options)
                          : "");
    const auto kept_inputs = n->retained_input_values();
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Edge& e = n->inputs()[i];
      std::string from;
      if (e.node) {
        from = fmt::format("op{}", e.node->seq());
      } else if (e.leaf) {
        from = fmt::format("leaf_{}", static_cast<const void*>(e.leaf.get()));
        from.erase(std::remove_if(from.begin(), from.end(), [](char c) { return !std::isalnum(c) && c != '_'; }),
                   from.end());
        if (leaves_drawn.insert(e.leaf.get()).second)
          s += fmt::format(
              "  {} [shape=box, style=filled, fillcolor=\"#d5e8d4\", label=\"{}\\n{} {}\\nrequires_grad{}\"];\n", from,
              escape(leaf_label(*e.leaf, leaf_ids)), e.shape.str(), dtype_name(e.dtype),
              show ? value_part(Tensor(e.leaf), Tensor(e.leaf->grad), e.leaf->grad != nullptr, options) : "");
      } else {
        from = fmt::format("const{}", consts++);
        const Tensor kept = i < kept_inputs.size() ? kept_inputs[i] : Tensor();
        std::string name;  // built in two steps: GCC 12 warns (-Wrestrict) on " " + std::string&&
        if (show && kept.defined() && !kept.name().empty()) name.append(" ").append(escape(kept.name()));
        s += fmt::format("  {} [shape=box, style=filled, fillcolor=\"#eeeeee\", label=\"const{}\\n{} {}{}\"];\n", from,
                         name, e.shape.str(), dtype_name(e.dtype),
                         show ? value_part(kept, Tensor(), false, options) : "");
      }
      // A 0-d input's label would be "[]" on every edge of a scalar graph: noise, so it has none.
      if (e.shape.empty())
        s += fmt::format("  {} -> {};\n", from, id);
      else
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

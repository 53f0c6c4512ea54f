// graph.h — looking at the tape: a text listing, a Graphviz DOT export (optionally with every
// node's value and gradient) and an HTML page that steps through backward, for people learning
// how backprop works.
//
//   Tensor loss = ((w * x).sum() - 3.0).pow(2);
//   fmt::print("{}", tape_string(loss));     // the entries backward will replay, in order
//   write_file("loss.dot", to_dot(loss));    // dot -Tpng loss.dot -o loss.png
//
//   RetainValuesGuard keep;                  // record and run backward with values kept
//   Tensor loss = ...; loss.backward();
//   write_file("loss.dot", to_dot(loss, {.values = true, .grads = true}));
//   write_file("loss.html", to_html(loss));  // open in a browser; → / ← step through backward
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"

#include "autograd/tensor.h"

namespace tapegrad {

class Node;

// While a RetainValuesGuard lives (on this thread), every tape entry recorded keeps a detached copy
// of its output value and of its constant inputs, and every backward keeps, for each entry it runs,
// the gradient dL/d(output) it gathered and the gradient it passed to each input (PyTorch's
// retain_grad on every node) — see Node::retained_value() and friends in autograd/node.h. They are
// freed with the graph. The cost: memory for one more reference to every output and gradient (the
// buffers themselves are shared, not copied); with no guard alive, one flag check per entry recorded
// and one per backward.
class RetainValuesGuard {
 public:
  explicit RetainValuesGuard(bool on = true) : prev_(RetainValuesMode::enabled()) {
    RetainValuesMode::set_enabled(on);
  }
  ~RetainValuesGuard() { RetainValuesMode::set_enabled(prev_); }
  RetainValuesGuard(const RetainValuesGuard&) = delete;
  RetainValuesGuard& operator=(const RetainValuesGuard&) = delete;

 private:
  bool prev_;
};

struct DotOptions {
  bool values = false;         // label each node with its value ("data …")
  bool grads = false;          // and with its gradient ("grad …")
  int64_t max_elements = 8;    // tensors with more elements show shape + min/mean/max instead
};

// The tape entries reachable from `root`, in recording order (oldest first). Empty for a leaf.
// The pointers are borrowed from root's graph: valid while `root` (or a tensor sharing its graph)
// lives — not for `tape_entries(f(x))` in a range-for, whose argument dies before the loop runs.
std::vector<const Node*> tape_entries(const Tensor& root);

// The tape entries reachable from `root`, in recording order (backward replays them bottom-up),
// one per line: "#3 mul(#1, x) -> [2, 3] float64".
std::string tape_string(const Tensor& root);

// The same graph as Graphviz DOT. Leaves are boxes (green when they require grad, i.e. receive a
// gradient; grey for constants); ops are ellipses labelled with their output shape; edges carry
// values forward (solid) and are labelled with shapes (except a 0-d input's: no "[]" on the edges of a
// scalar graph); the dashed edge shows where backward starts.
// With options.values / options.grads every node also shows its value / gradient (micrograd's
// draw_dot: "data 0.8814 | grad 0.5"): leaves their value and .grad; op entries their retained
// value and gradient (recorded and run under RetainValuesGuard, above); constants the value kept
// under the guard. A node with nothing kept shows its shape only.
std::string to_dot(const Tensor& root, const DotOptions& options = {});

// How the graph shows a tensor's numbers, one string per line: a tensor of at most max_elements
// elements in full with 4 significant digits (a scalar is "0.8814", a vector "[1, 2.5]"), a matrix
// on one line when that is at most 60 characters ("[[1, 2], [3, 4]]"), else one line per row of its
// last dimension ("[[-1.125, -2.25, …]," and " [-5.375, …]]"); a larger tensor as its
// shape and statistics on one line: "[64, 64] min -1.2 mean 0.03 max 2.5". Undefined: "(none)".
std::vector<std::string> value_lines(const Tensor& t, int64_t max_elements = 8);

// One self-contained HTML page (inline SVG and a short script; nothing fetched from the network)
// that steps backward through root's tape one entry at a time: step 0 is before backward
// (dL/dL = 1 at the root); step k highlights the k-th entry backward ran, the gradient it received
// and the gradient it added to each input, and shows every node's gradient accumulated so far.
// Buttons, the arrow keys and the URL hash (#step=K) choose the step. Record the graph and run
// backward under RetainValuesGuard; without it the page still steps through the entries and says
// that values were not kept. The layout (rows by depth, leaves at the top) is computed here.
std::string to_html(const Tensor& root, const std::string& title = "tapegrad: backward, one tape entry at a time");

}  // namespace tapegrad

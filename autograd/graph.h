// graph.h — looking at the tape: a text listing and a Graphviz DOT export, for people learning
// how backprop works.
//
//   Tensor loss = ((w * x).sum() - 3.0).pow(2);
//   fmt::print("{}", tape_string(loss));     // the entries backward will replay, in order
//   write_file("loss.dot", to_dot(loss));    // dot -Tpng loss.dot -o loss.png
#pragma once
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

class Node;

// The tape entries reachable from `root`, in recording order (oldest first). Empty for a leaf.
// The pointers are borrowed from root's graph: valid while `root` (or a tensor sharing its graph)
// lives — not for `tape_entries(f(x))` in a range-for, whose argument dies before the loop runs.
std::vector<const Node*> tape_entries(const Tensor& root);

// The tape entries reachable from `root`, in recording order (backward replays them bottom-up),
// one per line: "#3 mul(#1, x) -> [2, 3] float64".
std::string tape_string(const Tensor& root);

// The same graph as Graphviz DOT. Leaves are boxes (green when they require grad, i.e. receive a
// gradient; grey for constants); ops are ellipses labelled with their output shape; edges carry
// values forward (solid) and are labelled with shapes; the dashed edge shows where backward starts.
std::string to_dot(const Tensor& root);

}  // namespace tapegrad

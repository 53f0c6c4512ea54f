// graph_html.cpp — to_html: the tape as one self-contained HTML page that steps through backward.
//
// Here: the graph (op entries, leaves, constants), its layout (computed in C++: no Graphviz at run
// time), and what each backward step did, written as one JSON blob. The page that draws it (SVG +
// a short script) is the template in graph_html_page.h.
//
// Layout, top to bottom (the forward pass runs downwards, backward upwards):
//   row(op) = 1 + max(row of its op inputs), 1 when it has none — the longest path from a leaf;
//   row(leaf or constant) = min(row of its consumers) − 1, so a parameter sits right above its use;
//   within a row, each node wants a center x: an op under the mean of its op inputs (so a chain of
//   ops runs straight down), a leaf, a constant or an op without op inputs above the port where its
//   consumers take it; nodes are sorted by that (the barycenter heuristic of Sugiyama-style
//   layouts) and pushed right just enough not to overlap. A few top-down sweeps settle it.
//
// Steps: 0 = before backward (the root holds dL/dL); step k = the k-th entry backward ran (the
// reachable entries in decreasing sequence number, as engine.cpp runs them). Step k records the
// gradient the entry received, the contribution it passed to each input (Node::retained_input_grads,
// kept under RetainValuesGuard) and each input's gradient accumulated so far (summed here in float64).
#include <algorithm>
#include <map>
#include <string_view>
#include <nlohmann/json.hpp>

#include "autograd/graph.h"
#include "autograd/graph_html_page.h"
#include "autograd/graph_rule.h"
#include "autograd/ops.h"
#include "autograd/node.h"

namespace tapegrad {

namespace {

// Text metrics the page uses (a 12 px monospace font), in pixels.
constexpr double kCharWidth = 7.3, kLineHeight = 15, kPad = 8, kGapX = 28, kGapY = 48, kMargin = 24;
constexpr double kMinWidth = 96;
constexpr int64_t kMaxElements = 8;

struct GraphNode {
  std::string kind;  // "op", "leaf" (requires grad) or "const"
  std::string title, sub;
  std::vector<std::string> value;  // "data …" lines, empty when not kept
  int row = 0;
  std::vector<int> preds, succs;
  size_t grad_lines = 0, grad_chars = 0;  // the largest gradient text any step shows
  double x = 0, y = 0, w = 0, h = 0;
  double center() const { return x + w / 2; }
};

struct GraphEdge {
  int from = 0, to = 0, slot = 0, slots = 1;
  std::string shape;
};

std::vector<std::string> prefixed(const std::string& prefix, const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (size_t i = 0; i < lines.size(); ++i)
    out.push_back((i == 0 ? prefix : std::string(prefix.size(), ' ')) + lines[i]);
  return out;
}

// One gradient as the page shows it: "grad " + value_lines.
std::vector<std::string> grad_text(const Tensor& g) { return prefixed("grad ", value_lines(g, kMaxElements)); }

struct Added {
  int edge = 0;                    // the edge to the input it went to
  std::vector<std::string> lines;  // the contribution, "+ …"
  std::string rule;                // why: "grad × w2 = 0.1807 × 0.4 = 0.07228" (graph_rule.h)
};

struct Step {
  int entry = -1;                 // node index of the entry that ran (the root at step 0)
  bool ran = false;               // false: no gradient reached it, backward skipped it
  std::vector<std::string> received;
  std::vector<Added> adds;
  std::vector<std::pair<int, std::vector<std::string>>> totals;  // node index → grad so far
};

class GraphPage {
 public:
  explicit GraphPage(const Tensor& root) {
    build(root);
    if (!nodes_.empty()) {
      record_steps(root);
      assign_rows();
      place();
    }
  }
  std::string json() const;

 private:
  std::vector<GraphNode> nodes_;
  std::vector<GraphEdge> edges_;
  std::vector<const Node*> entries_;       // recording order
  std::map<const Node*, int> op_index_;    // entry → node index
  std::vector<std::vector<int>> in_edges_;  // per op node: its edges by input slot (-1: none)
  std::vector<Step> steps_;
  bool values_kept_ = false, grads_kept_ = false;

  int add_node(GraphNode n) {
    nodes_.push_back(std::move(n));
    in_edges_.emplace_back();
    return static_cast<int>(nodes_.size()) - 1;
  }
  void build(const Tensor& root);
  void record_steps(const Tensor& root);
  void assign_rows();
  void size_nodes();
  void place_row(std::vector<int>& row, const std::vector<double>& want);
  void place();
};

void GraphPage::build(const Tensor& root) {
  if (!root.defined()) return;
  std::map<const TensorImpl*, int> leaf_index;
  int unnamed = 0;
  auto leaf_node = [&](const std::shared_ptr<TensorImpl>& impl) {
    if (auto it = leaf_index.find(impl.get()); it != leaf_index.end()) return it->second;
    GraphNode g;
    g.kind = impl->requires_grad ? "leaf" : "const";
    g.title = impl->name.empty() ? fmt::format("leaf{}", unnamed++) : impl->name;
    g.sub = fmt::format("{} {}", impl->shape.str(), dtype_name(impl->dtype));
    g.value = prefixed("data ", value_lines(Tensor(impl), kMaxElements));
    const int i = add_node(std::move(g));
    leaf_index.emplace(impl.get(), i);
    return i;
  };
  if (!root.grad_fn()) {
    leaf_node(root.impl());
    return;
  }
  entries_ = tape_entries(root);
  for (const Node* n : entries_) {
    GraphNode g;
    g.kind = "op";
    g.title = fmt::format("#{} {}", n->seq(), n->name());
    g.sub = fmt::format("{} {}", n->out_shape().str(), dtype_name(n->out_dtype()));
    if (n->retained_value().defined()) {
      g.value = prefixed("data ", value_lines(n->retained_value(), kMaxElements));
      values_kept_ = true;
    }
    op_index_[n] = add_node(std::move(g));
  }
  for (const Node* n : entries_) {
    const int to = op_index_[n];
    const auto kept = n->retained_input_values();
    in_edges_[to].assign(n->inputs().size(), -1);
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Edge& e = n->inputs()[i];
      int from;
      if (e.node) {
        from = op_index_.at(e.node.get());
      } else if (e.leaf) {
        from = leaf_node(e.leaf);
      } else {
        GraphNode g;
        g.kind = "const";
        const Tensor value = i < kept.size() ? kept[i] : Tensor();
        g.title = value.defined() && !value.name().empty() ? "const " + value.name() : "const";
        g.sub = fmt::format("{} {}", e.shape.str(), dtype_name(e.dtype));
        if (value.defined()) g.value = prefixed("data ", value_lines(value, kMaxElements));
        from = add_node(std::move(g));
      }
      in_edges_[to][i] = static_cast<int>(edges_.size());
      edges_.push_back({from, to, static_cast<int>(i), static_cast<int>(n->inputs().size()), e.shape.str()});
      nodes_[from].succs.push_back(to);
      nodes_[to].preds.push_back(from);
    }
  }
}

// What each backward step did, from what the engine retained. The running totals are float64 sums
// of the contributions (for a leaf: this backward's part of .grad only).
void GraphPage::record_steps(const Tensor& root) {
  NoGradGuard no_grad;
  auto note = [this](const std::vector<std::string>& lines, int node) {
    nodes_[node].grad_lines = std::max(nodes_[node].grad_lines, lines.size());
    for (const std::string& l : lines) nodes_[node].grad_chars = std::max(nodes_[node].grad_chars, l.size());
  };
  Step start;
  if (!root.grad_fn()) {
    steps_.push_back(start);
    return;
  }
  start.entry = op_index_.at(root.grad_fn().get());
  start.ran = true;
  const Tensor& seed = root.grad_fn()->retained_grad();
  grads_kept_ = seed.defined();
  if (grads_kept_) {
    start.totals.emplace_back(start.entry, grad_text(seed));
    note(start.totals.back().second, start.entry);
  }
  steps_.push_back(std::move(start));

  std::vector<Tensor> total(nodes_.size());
  std::vector<const Node*> order(entries_.rbegin(), entries_.rend());  // as backward runs them
  for (const Node* n : order) {
    Step s;
    s.entry = op_index_.at(n);
    s.ran = n->retained_grad().defined();
    if (s.ran) s.received = grad_text(n->retained_grad());
    const auto contributions = n->retained_input_grads();
    detail::RuleInputs rule;
    rule.op = n->name();
    rule.received = n->retained_grad();
    const auto kept = n->retained_input_values();
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Edge& e = n->inputs()[i];
      rule.titles.push_back(nodes_[edges_[in_edges_[s.entry][i]].from].title);
      rule.values.push_back(e.node ? e.node->retained_value() : e.leaf ? Tensor(e.leaf) : i < kept.size() ? kept[i]
                                                                                                       : Tensor());
    }
    for (size_t i = 0; i < contributions.size(); ++i) {
      const Tensor& c = contributions[i];
      if (!c.defined()) continue;
      const int edge = in_edges_[s.entry][i];
      const int to = edges_[edge].from;
      const Tensor c64 = c.detach().to(kCPU).to(kFloat64);
      total[to] = total[to].defined() ? add(total[to], c64) : c64.clone();
      rule.slot = i;
      rule.added = c;
      s.adds.push_back({edge, prefixed("+ ", value_lines(c, kMaxElements)), detail::local_rule_with_numbers(rule)});
      s.totals.emplace_back(to, grad_text(total[to]));
      note(s.adds.back().lines, to);
      note(s.totals.back().second, to);
    }
    steps_.push_back(std::move(s));
  }
}

void GraphPage::assign_rows() {
  // nodes_ holds the op entries first, in recording order (inputs before consumers)
  for (size_t i = 0; i < entries_.size(); ++i) {
    int row = 1;
    for (int p : nodes_[i].preds)
      if (nodes_[p].kind == "op") row = std::max(row, nodes_[p].row + 1);
    nodes_[i].row = row;
  }
  for (size_t i = entries_.size(); i < nodes_.size(); ++i) {
    int row = 1 << 30;
    for (int s : nodes_[i].succs) row = std::min(row, nodes_[s].row - 1);
    nodes_[i].row = nodes_[i].succs.empty() ? 0 : row;
  }
}

void GraphPage::size_nodes() {
  const size_t placeholder = std::string("grad (nothing yet)").size();  // what the page shows before
  for (GraphNode& n : nodes_) {
    size_t chars = n.title.size() + 2 + n.sub.size();  // one line: "#5 tanh  [4] float32"
    for (const std::string& l : n.value) chars = std::max(chars, l.size());
    chars = std::max(chars, n.grad_chars);
    if (grads_kept_ && n.kind != "const") chars = std::max(chars, placeholder), n.grad_lines = std::max<size_t>(n.grad_lines, 1);
    n.w = std::max(kMinWidth, static_cast<double>(chars) * kCharWidth + 2 * kPad);
    const size_t lines = 1 + n.value.size() + n.grad_lines;
    n.h = static_cast<double>(lines) * kLineHeight + 2 * kPad;
  }
}

// Places a row's nodes left to right in the given order, as close to their wanted centers as
// the order and the gaps allow: least squares, weighted so that tape entries (weight 10) keep their
// place and leaves and constants (weight 1) make room. With y_i = x_i − (widths and gaps of the nodes
// before i), "no overlap" is "y non-decreasing": a weighted isotonic regression, solved by pooling
// adjacent violators (merge neighbouring blocks while their means are out of order).
void GraphPage::place_row(std::vector<int>& row, const std::vector<double>& want) {
  struct Block {
    double weight, mean;
    size_t count;
  };
  std::vector<Block> blocks;
  double offset = 0;
  for (int i : row) {
    const GraphNode& n = nodes_[i];
    blocks.push_back({n.kind == "op" ? 10.0 : 1.0, want[i] - n.w / 2 - offset, 1});
    offset += n.w + kGapX;
    while (blocks.size() > 1 && blocks[blocks.size() - 2].mean > blocks.back().mean) {
      const Block b = blocks.back();
      blocks.pop_back();
      Block& a = blocks.back();
      a.mean = (a.mean * a.weight + b.mean * b.weight) / (a.weight + b.weight);
      a.weight += b.weight;
      a.count += b.count;
    }
  }
  offset = 0;
  size_t k = 0;
  for (const Block& b : blocks)
    for (size_t c = 0; c < b.count; ++c, ++k) {
      GraphNode& n = nodes_[row[k]];
      n.x = b.mean + offset;
      offset += n.w + kGapX;
    }
}

void GraphPage::place() {
  size_nodes();
  int rows = 0;
  for (const GraphNode& n : nodes_) rows = std::max(rows, n.row + 1);
  std::vector<std::vector<int>> by_row(rows);
  for (size_t i = 0; i < nodes_.size(); ++i) by_row[nodes_[i].row].push_back(static_cast<int>(i));
  std::vector<double> want(nodes_.size(), 0);
  for (auto& row : by_row) place_row(row, want);  // start: left-aligned in creation order

  // where a node's consumers take it: the mean x of the ports of its out-edges
  auto consumer_ports = [this](int i, double fallback) {
    double sum = 0;
    int n = 0;
    for (const GraphEdge& e : edges_)
      if (e.from == i) sum += nodes_[e.to].x + nodes_[e.to].w * (e.slot + 1) / (e.slots + 1), ++n;
    return n ? sum / n : fallback;
  };
  for (int sweep = 0; sweep < 4; ++sweep) {
    for (auto& row : by_row) {
      for (int i : row) {
        const GraphNode& n = nodes_[i];
        double sum = 0;
        int op_inputs = 0;
        for (int p : n.preds)
          if (nodes_[p].kind == "op") sum += nodes_[p].center(), ++op_inputs;
        want[i] = op_inputs ? sum / op_inputs : consumer_ports(i, n.center());
      }
      // A stable sort by `want`: std::sort with the original position as tie-break (libstdc++ 12's
      // std::stable_sort trips clang's -Wdeprecated-declarations).
      std::vector<std::pair<double, size_t>> keyed;
      for (size_t k = 0; k < row.size(); ++k) keyed.emplace_back(want[row[k]], k);
      std::sort(keyed.begin(), keyed.end());
      std::vector<int> sorted;
      for (const auto& entry : keyed) sorted.push_back(row[entry.second]);
      row = std::move(sorted);
      place_row(row, want);
    }
  }
  // shift everything so the leftmost node starts at the margin; rows stacked by their tallest node
  double left = 1e300;
  for (const GraphNode& n : nodes_) left = std::min(left, n.x);
  double y = kMargin;
  for (auto& row : by_row) {
    double tallest = 0;
    for (int i : row) {
      nodes_[i].x += kMargin - left;
      nodes_[i].y = y;
      tallest = std::max(tallest, nodes_[i].h);
    }
    y += tallest + kGapY;
  }
}

std::string GraphPage::json() const {
  using nlohmann::json;
  auto lines_json = [](const std::vector<std::string>& lines) { return json(lines); };
  json j;
  j["values_kept"] = values_kept_;
  j["grads_kept"] = grads_kept_;
  j["metrics"] = {{"char_width", kCharWidth}, {"line_height", kLineHeight}, {"pad", kPad}};
  json nodes = json::array();
  for (const GraphNode& n : nodes_)
    nodes.push_back({{"kind", n.kind}, {"title", n.title}, {"sub", n.sub}, {"value", lines_json(n.value)},
                     {"x", n.x}, {"y", n.y}, {"w", n.w}, {"h", n.h}});
  j["nodes"] = std::move(nodes);
  json edges = json::array();
  for (const GraphEdge& e : edges_)
    edges.push_back({{"from", e.from}, {"to", e.to}, {"slot", e.slot}, {"slots", e.slots}, {"shape", e.shape}});
  j["edges"] = std::move(edges);
  json steps = json::array();
  for (const Step& s : steps_) {
    json adds = json::array(), totals = json::array();
    for (const Added& a : s.adds) adds.push_back({{"edge", a.edge}, {"lines", lines_json(a.lines)}, {"rule", a.rule}});
    for (const auto& [node, lines] : s.totals) totals.push_back({{"node", node}, {"lines", lines_json(lines)}});
    steps.push_back({{"entry", s.entry}, {"ran", s.ran}, {"received", lines_json(s.received)}, {"adds", adds},
                     {"totals", totals}});
  }
  j["steps"] = std::move(steps);
  // Invalid UTF-8 in a name becomes U+FFFD; '<', '>' and '&' (only possible inside JSON strings)
  // become \u escapes so nothing in the blob can end the <script> element that holds it.
  const std::string raw = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string out;
  out.reserve(raw.size());
  for (char c : raw) {
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else out += c;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

}  // namespace

std::string to_html(const Tensor& root, const std::string& title) {
  const GraphPage page(root);
  const std::string data = page.json(), escaped_title = html_escape(title);
  // One pass over the template, so a title containing "@DATA@" stays text.
  const std::string_view t = detail::kGraphHtmlPage;
  std::string html;
  for (size_t i = 0; i < t.size();) {
    if (t.compare(i, 7, "@TITLE@") == 0) html += escaped_title, i += 7;
    else if (t.compare(i, 6, "@DATA@") == 0) html += data, i += 6;
    else html += t[i++];
  }
  return html;
}

}  // namespace tapegrad

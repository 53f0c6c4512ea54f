// cmd_dot.cpp — `tapegrad dot`: draw the tape of the README's first example,
// loss = Σ (tanh(x·w + b) − y)², as Graphviz DOT (--out; --values adds every node's value and
// gradient after backward) and, with --html, also as an HTML page that steps through backward (the
// DOT then goes beside the page, x.html → x.dot, unless --out names it).
// Parsing and wiring only: the drawing is autograd/graph.h, the example tools/demo.cpp.
#include <fmt/format.h>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/file_io.h"
#include "kernels/error.h"
#include "tools/commands.h"
#include "tools/demo.h"

namespace tapegrad::cli {

namespace {

// "dir/x.html" → "dir/x.dot" (and "x.htm" → "x.dot", "x" → "x.dot").
std::string dot_beside(const std::string& html_path) {
  for (const char* ext : {".html", ".htm"}) {
    const std::string e = ext;
    if (html_path.size() > e.size() && html_path.compare(html_path.size() - e.size(), e.size(), e) == 0)
      return html_path.substr(0, html_path.size() - e.size()) + ".dot";
  }
  return html_path + ".dot";
}

}  // namespace

int cmd_dot(Args args) {
  po::options_description opts("tapegrad dot options");
  opts.add_options()("out", po::value<std::string>(),
                     "write the DOT graph here (default example.dot; with --html PAGE.html, PAGE.dot)")(
      "values", po::bool_switch(), "run backward and label every node with its value and gradient")(
      "html", po::value<std::string>(), "also write a page that steps through backward here (open it in a browser)");
  po::variables_map vm;
  if (!parse(args, opts, vm, "tapegrad dot [--out FILE.dot] [--values] [--html FILE.html]")) return 0;
  const bool values = vm["values"].as<bool>();
  const std::string html_path = vm.count("html") ? vm["html"].as<std::string>() : "";
  std::string dot_path = vm.count("out") ? vm["out"].as<std::string>() : "";
  // The DOT graph is always written: beside the page when only --html names a file (x.html → x.dot).
  if (dot_path.empty()) dot_path = html_path.empty() ? "example.dot" : dot_beside(html_path);

  // Values and gradients are kept only while the guard lives: record and run backward under it.
  // (--values shows tensors of up to 12 elements in full: all of the example, x [4, 3] included.)
  const bool keep = values || !html_path.empty();
  RetainValuesGuard guard(keep);
  Tensor loss = demo::example_expression();
  if (keep) loss.backward();

  {
    data::write_file_atomic(dot_path, to_dot(loss, {.values = values, .grads = values, .max_elements = 12}),
                            vm.count("out") ? "dot --out" : "dot --html (the .dot beside the page)");
    const std::string svg_path = dot_path.substr(0, dot_path.rfind(".dot") == std::string::npos ? dot_path.size()
                                                                                                 : dot_path.rfind(".dot"));
    fmt::print("wrote {} (render: dot -Tsvg {} -o {}.svg)\n", dot_path, dot_path, svg_path);
  }
  if (!html_path.empty()) {
    data::write_file_atomic(html_path, to_html(loss, "tapegrad: backward through the README's first example"),
                            "dot --html");
    fmt::print("wrote {} (open it in a browser; the arrow keys step through backward)\n", html_path);
  }
  return 0;
}

}  // namespace tapegrad::cli

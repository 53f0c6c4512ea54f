// test_graph.cpp — looking at the tape: tape_entries / tape_string list the entries in recording
// order with their names and inputs; to_dot is valid-looking Graphviz (rendered when `dot` exists);
// RetainValuesGuard keeps the values and gradients a hand computation gives, and frees them with the
// graph; to_dot's value labels and to_html's page data show exactly those numbers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "autograd/node.h"
#include "autograd/tapegrad.h"

using namespace tapegrad;

namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

// loss = (Σ w·x − 3)²  with w a named parameter and x a named constant.
struct Graph {
  Tensor w = tensor({1, 2, 3}, Options(kFloat64).requires_grad());
  Tensor x = tensor({4, 5, 6}, kFloat64);
  Tensor loss;
  Graph() {
    w.set_name("w");
    x.set_name("x");
    loss = ((w * x).sum() - 3.0).pow(2);
  }
};

}  // namespace

TEST_CASE("tape_entries lists the reachable entries in recording order", "[graph]") {
  Graph g;
  const auto entries = tape_entries(g.loss);
  REQUIRE(entries.size() == 4);
  CHECK(std::string(entries[0]->name()) == "mul");
  CHECK(std::string(entries[1]->name()) == "sum");
  CHECK(std::string(entries[2]->name()) == "add_scalar");
  CHECK(std::string(entries[3]->name()) == "pow");
  for (size_t i = 1; i < entries.size(); ++i) CHECK(entries[i - 1]->seq() < entries[i]->seq());
  CHECK(entries[3] == g.loss.grad_fn().get());
  CHECK(entries[0]->out_shape() == Shape{3});
  CHECK(entries[1]->out_shape() == Shape{});
  CHECK(entries[0]->out_dtype() == kFloat64);
  // the mul entry's inputs: the leaf w (accumulates .grad), the constant x (no edge)
  REQUIRE(entries[0]->inputs().size() == 2);
  CHECK(entries[0]->inputs()[0].leaf == g.w.impl());
  CHECK_FALSE(entries[0]->inputs()[1].needs_grad());
  CHECK(entries[1]->inputs()[0].node.get() == entries[0]);
  // an entry reachable twice (diamond) is listed once; a leaf has no entries
  Tensor h = exp(g.w);
  CHECK(tape_entries(h * h).size() == 2);
  CHECK(tape_entries(g.w).empty());
  CHECK(tape_entries(Tensor()).empty());
}

TEST_CASE("tape_string shows each entry with its inputs, shape and dtype", "[graph]") {
  Graph g;
  const auto e = tape_entries(g.loss);
  const std::string s = tape_string(g.loss);
  INFO(s);
  CHECK(s.rfind("tape: 4 entries", 0) == 0);
  CHECK(count(s, "\n") == 5);
  const size_t p_mul = s.find("mul(w [3], const [3]) -> [3] float64");
  const size_t p_sum = s.find(fmt::format("sum(#{}) -> [] float64", e[0]->seq()));
  const size_t p_add = s.find(fmt::format("add_scalar(#{}) -> []", e[1]->seq()));
  const size_t p_pow = s.find(fmt::format("pow(#{}) -> [] float64", e[2]->seq()));
  REQUIRE(p_mul != std::string::npos);
  REQUIRE(p_sum != std::string::npos);
  REQUIRE(p_add != std::string::npos);
  REQUIRE(p_pow != std::string::npos);
  CHECK(p_mul < p_sum);
  CHECK(p_sum < p_add);
  CHECK(p_add < p_pow);
  CHECK(s.find(fmt::format("#{}", e[0]->seq())) < p_mul);  // each line starts with its own number
  CHECK(s.find("freed") == std::string::npos);

  // after backward the entries say their saved tensors are gone
  g.loss.backward();
  CHECK(count(tape_string(g.loss), "[saved tensors freed]") == 4);

  // an unnamed leaf gets a generated label; a leaf root has an empty tape
  Tensor a = ones({2}, Options().requires_grad());
  CHECK(tape_string(a * 2.0).find("mul_scalar(leaf0 [2]) -> [2] float32") != std::string::npos);
  CHECK(tape_string(a).find("leaf") != std::string::npos);
  CHECK(tape_string(a).find("requires grad") != std::string::npos);
}

TEST_CASE("to_dot gives a DOT graph with one node per op, named leaves and edges", "[graph]") {
  Graph g;
  const auto entries = tape_entries(g.loss);
  const std::string d = to_dot(g.loss);
  INFO(d);
  CHECK(d.rfind("digraph", 0) == 0);
  CHECK(d.substr(d.size() - 2) == "}\n");
  CHECK(count(d, "{") == count(d, "}"));
  CHECK(count(d, "shape=ellipse") == entries.size());
  for (const Node* n : entries) {
    CHECK(d.find(fmt::format("op{} [", n->seq())) != std::string::npos);
    CHECK(d.find(fmt::format("#{} {}", n->seq(), n->name())) != std::string::npos);
  }
  CHECK(d.find("label=\"w\\n[3] float64") != std::string::npos);  // the named parameter
  CHECK(count(d, "const\\n[3] float64") == 1);                    // x: a constant box
  // edges: w→mul, x→mul, mul→sum, sum→add, add→pow, and the dashed backward start
  CHECK(count(d, " -> ") == 6);
  for (size_t i = 1; i < entries.size(); ++i)
    CHECK(d.find(fmt::format("op{} -> op{}", entries[i - 1]->seq(), entries[i]->seq())) != std::string::npos);
  CHECK(d.find(fmt::format("grad -> op{}", entries.back()->seq())) != std::string::npos);
  // a leaf used twice is drawn once
  Tensor p = ones({2}, Options().requires_grad());
  p.set_name("p");
  const std::string d2 = to_dot((p * p).sum());
  CHECK(count(d2, "label=\"p\\n") == 1);
  CHECK(count(d2, " -> ") == 4);  // p→mul twice, mul→sum, grad→sum
  // a root that is a leaf
  CHECK(to_dot(p).rfind("digraph", 0) == 0);
  CHECK(to_dot(p).find("p\\n[2]") != std::string::npos);
}

TEST_CASE("to_dot labels an edge with its input's shape, except a 0-d input's (no \"[]\" noise)", "[graph]") {
  Tensor a = scalar_tensor(1.5, Options(kFloat64).requires_grad()), v = ones({3}, Options(kFloat64).requires_grad());
  a.set_name("a");
  v.set_name("v");
  const Tensor scalar_graph = tanh(a * a + a);
  const std::string d = to_dot(scalar_graph, {.values = true, .grads = true});
  INFO(d);
  CHECK(d.find("label=\"[]\"") == std::string::npos);
  CHECK(count(d, " -> ") == 6);  // a→mul twice, mul→add, a→add, add→tanh, and backward's start
  const std::string mixed = to_dot((v * a).sum());
  INFO(mixed);
  CHECK(count(mixed, "[label=\"[3]\"]") == 2);  // v→mul and mul→sum keep their shape
  CHECK(mixed.find("label=\"[]\"") == std::string::npos);
}

TEST_CASE("to_dot output renders with Graphviz when it is installed", "[graph]") {
  if (std::system("command -v dot > /dev/null 2>&1") != 0) {
    WARN("the `dot` program is not installed: skipping the Graphviz rendering check");
    return;
  }
  Graph g;
  g.w.set_name("w \"quoted\" \\ name");  // must be escaped in the DOT label
  const std::string base = "/tmp/tapegrad_test_graph_" + std::to_string(::getpid());
  {
    std::ofstream f(base + ".dot");
    f << to_dot(g.loss);
  }
  const int rc = std::system(("dot -Tsvg " + base + ".dot -o " + base + ".svg 2>/dev/null").c_str());
  CHECK(rc == 0);
  std::ifstream svg(base + ".svg");
  std::string text((std::istreambuf_iterator<char>(svg)), std::istreambuf_iterator<char>());
  CHECK(text.find("<svg") != std::string::npos);
  CHECK(text.find("quoted") != std::string::npos);
  std::remove((base + ".dot").c_str());
  std::remove((base + ".svg").c_str());
}

// ---- values and gradients on the graph (RetainValuesGuard, to_dot with DotOptions, to_html) ----

namespace {

// Lines of DOT labels starting with `what` ("data " / "grad "): they follow a \n or a \l.
size_t label_lines(const std::string& dot, const std::string& what) {
  return count(dot, "\\n" + what) + count(dot, "\\l" + what);
}

std::vector<double> values_of(const Tensor& t) {
  const Tensor c = t.to(kFloat64).contiguous();
  return std::vector<double>(c.data<double>(), c.data<double>() + c.numel());
}

}  // namespace

TEST_CASE("without RetainValuesGuard nothing is kept", "[graph]") {
  CHECK_FALSE(RetainValuesMode::enabled());
  Graph g;
  g.loss.backward();
  for (const Node* n : tape_entries(g.loss)) {
    CHECK_FALSE(n->retained_value().defined());
    CHECK_FALSE(n->retained_grad().defined());
    CHECK(n->retained_input_grads().empty());
    CHECK(n->retained_input_values().empty());
  }
  // asking for values then shows only what leaves hold: w's value and .grad
  const std::string d = to_dot(g.loss, {.values = true, .grads = true});
  INFO(d);
  CHECK(label_lines(d, "data ") == 1);
  CHECK(label_lines(d, "grad ") == 1);
  CHECK(d.find("data [1, 2, 3]") != std::string::npos);
  CHECK(d.find("grad [232, 290, 348]") != std::string::npos);
}

TEST_CASE("RetainValuesGuard keeps every entry's value and the gradients a hand computation gives", "[graph]") {
  // loss = a², a = s − 3, s = Σ m, m = w·x with w = [1, 2, 3], x = [4, 5, 6]:
  //   m = [4, 10, 18], s = 32, a = 29, loss = 841
  //   dL/dL = 1; dL/da = 2a = 58; dL/ds = 58 · 1; dL/dm = 58 · [1, 1, 1]; dL/dw = dL/dm · x = [232, 290, 348]
  RetainValuesGuard keep;
  CHECK(RetainValuesMode::enabled());
  Graph g;
  g.loss.backward();
  const auto e = tape_entries(g.loss);  // mul, sum, add_scalar, pow
  REQUIRE(e.size() == 4);
  CHECK(values_of(e[0]->retained_value()) == std::vector<double>{4, 10, 18});
  CHECK(e[1]->retained_value().item<double>() == 32);
  CHECK(e[2]->retained_value().item<double>() == 29);
  CHECK(e[3]->retained_value().item<double>() == 841);
  CHECK_FALSE(e[3]->retained_value().requires_grad());  // detached: no history, no cycle
  CHECK(e[3]->retained_grad().item<double>() == 1);
  CHECK(e[2]->retained_grad().item<double>() == 58);
  CHECK(e[1]->retained_grad().item<double>() == 58);
  CHECK(values_of(e[0]->retained_grad()) == std::vector<double>{58, 58, 58});
  // what each entry passed to each input: the same numbers, one slot per input
  REQUIRE(e[3]->retained_input_grads().size() == 1);
  CHECK(e[3]->retained_input_grads()[0].item<double>() == 58);
  REQUIRE(e[0]->retained_input_grads().size() == 2);
  CHECK(values_of(e[0]->retained_input_grads()[0]) == std::vector<double>{232, 290, 348});
  CHECK_FALSE(e[0]->retained_input_grads()[1].defined());  // x is a constant
  CHECK(values_of(g.w.grad()) == std::vector<double>{232, 290, 348});
  // the constant input's value is kept (with its name) in the entry that used it
  REQUIRE(e[0]->retained_input_values().size() == 2);
  CHECK_FALSE(e[0]->retained_input_values()[0].defined());  // w: a leaf, its value is w itself
  CHECK(values_of(e[0]->retained_input_values()[1]) == std::vector<double>{4, 5, 6});
  CHECK(e[0]->retained_input_values()[1].name() == "x");

  // an intermediate gradient against finite differences: dL/da at a = 29
  const double h = 1e-6, fd = ((29 + h) * (29 + h) - (29 - h) * (29 - h)) / (2 * h);
  CHECK(e[2]->retained_grad().item<double>() == Approx(fd).epsilon(1e-6));
}

TEST_CASE("retained contributions are summed to the input's shape and accumulate correctly", "[graph]") {
  Tensor b = tensor({0.5}, Options(kFloat64).requires_grad());
  Tensor v = tensor({1, 2, 3, 4}, Options(kFloat64).requires_grad());
  Tensor plain_b_grad, plain_v_grad;
  auto build = [&] {
    Tensor h = exp(v + b);                 // [4], b broadcast
    return (h * h + h).sum();              // h reaches backward three times (two slots of mul, add)
  };
  {
    Tensor loss = build();
    loss.backward();
    plain_b_grad = b.grad().clone();
    plain_v_grad = v.grad().clone();
    b.zero_grad();
    v.zero_grad();
  }
  RetainValuesGuard keep;
  Tensor loss = build();
  loss.backward();
  // the same gradients as without the guard (retained copies must not be written into)
  CHECK(values_of(b.grad()) == values_of(plain_b_grad));
  CHECK(values_of(v.grad()) == values_of(plain_v_grad));
  const auto e = tape_entries(loss);  // add, exp, mul, add, sum
  REQUIRE(e.size() == 5);
  const Node& add_vb = *e[0];
  REQUIRE(add_vb.retained_input_grads().size() == 2);
  CHECK(add_vb.retained_input_grads()[1].shape() == Shape{1});  // b's share: summed over the 4 elements
  CHECK(add_vb.retained_input_grads()[1].item<double>() == Approx(values_of(b.grad())[0]));
  // exp's output received mul's two contributions (h·g each) and add's (g): 2h + 1
  const std::vector<double> hv = values_of(e[1]->retained_value());
  const Node& mul = *e[2];
  for (int slot = 0; slot < 2; ++slot) CHECK(values_of(mul.retained_input_grads()[slot]) == hv);
  const std::vector<double> gh = values_of(e[1]->retained_grad());
  for (size_t i = 0; i < hv.size(); ++i) CHECK(gh[i] == Approx(2 * hv[i] + 1));
}

TEST_CASE("RetainValuesGuard: nested guards restore, retained tensors die with the graph", "[graph]") {
  std::weak_ptr<TensorImpl> value, grad, contribution;
  {
    RetainValuesGuard keep;
    {
      RetainValuesGuard off(false);
      CHECK_FALSE(RetainValuesMode::enabled());
    }
    CHECK(RetainValuesMode::enabled());
    Graph g;
    g.loss.backward();
    const Node* mul = tape_entries(g.loss)[0];
    value = mul->retained_value().impl();
    grad = mul->retained_grad().impl();
    contribution = mul->retained_input_grads()[0].impl();
    CHECK_FALSE(value.expired());
    CHECK_FALSE(grad.expired());
    CHECK_FALSE(contribution.expired());
  }  // the graph (and the guard) end here
  CHECK_FALSE(RetainValuesMode::enabled());
  CHECK(value.expired());
  CHECK(grad.expired());
  CHECK(contribution.expired());
  // a graph recorded after the guard ended keeps nothing
  Graph later;
  later.loss.backward();
  CHECK_FALSE(tape_entries(later.loss)[0]->retained_value().defined());
  CHECK_FALSE(tape_entries(later.loss)[0]->retained_grad().defined());
}

TEST_CASE("value_lines: small tensors in full with 4 digits, large ones as statistics", "[graph]") {
  using L = std::vector<std::string>;
  CHECK(value_lines(scalar_tensor(0.88137, kFloat64)) == L{"0.8814"});
  CHECK(value_lines(tensor({1, 2, 3}, kFloat64)) == L{"[1, 2, 3]"});
  CHECK(value_lines(tensor({1, 2, 3, 4}, kFloat64).reshape({2, 2})) == L{"[[1, 2], [3, 4]]"});  // short: one line
  CHECK(value_lines(tensor({-1.125, -2.25, -3.125, -4.25, -5.375, -6.75, -7.125, -8.25}, kFloat64).reshape({2, 4})) ==
        L{"[[-1.125, -2.25, -3.125, -4.25],", " [-5.375, -6.75, -7.125, -8.25]]"});  // too long for one line
  CHECK(value_lines(arange(8, kFloat64).reshape({2, 2, 2})) == L{"[[[0, 1], [2, 3]], [[4, 5], [6, 7]]]"});
  CHECK(value_lines((arange(8, kFloat64) + 0.125).reshape({2, 2, 2})) ==
        L{"[[[0.125, 1.125],", "  [2.125, 3.125]],", " [[4.125, 5.125],", "  [6.125, 7.125]]]"});
  CHECK(value_lines(arange(10, kFloat64), 8) == L{"[10] min 0 mean 4.5 max 9"});
  CHECK(value_lines(arange(10, kFloat64), 10).size() == 1);
  CHECK(value_lines(tensor({-0.000123456}, kFloat32)) == L{"[-0.0001235]"});
  CHECK(value_lines(Tensor()) == L{"(none)"});
}

TEST_CASE("to_dot with values and grads labels every node with the tensors' numbers", "[graph]") {
  RetainValuesGuard keep;
  Graph g;
  const std::string before = to_dot(g.loss, {.values = true, .grads = true});
  CHECK(label_lines(before, "grad ") == 0);  // no backward yet: values only
  CHECK(before.find("data 841") != std::string::npos);
  g.loss.backward();
  const auto e = tape_entries(g.loss);
  const std::string d = to_dot(g.loss, {.values = true, .grads = true});
  INFO(d);
  CHECK(d.find(fmt::format("#{} pow\\n[] float64\\ndata 841\\lgrad 1\\l", e[3]->seq())) != std::string::npos);
  CHECK(d.find(fmt::format("#{} add_scalar\\n[] float64\\ndata 29\\lgrad 58\\l", e[2]->seq())) != std::string::npos);
  CHECK(d.find("data [4, 10, 18]\\lgrad [58, 58, 58]\\l") != std::string::npos);
  CHECK(d.find("label=\"w\\n[3] float64\\nrequires_grad\\ndata [1, 2, 3]\\lgrad [232, 290, 348]\\l\"") !=
        std::string::npos);
  CHECK(d.find("label=\"const x\\n[3] float64\\ndata [4, 5, 6]\\l\"") != std::string::npos);
  CHECK(label_lines(d, "data ") == 6);  // 4 entries, w, x
  CHECK(label_lines(d, "grad ") == 5);  // not the constant
  // values only; a small max_elements summarises
  const std::string v = to_dot(g.loss, {.values = true, .grads = false, .max_elements = 2});
  CHECK(label_lines(v, "grad ") == 0);
  CHECK(v.find("data [3] min 4 mean 10.67 max 18") != std::string::npos);
  // options off: the plain graph, exactly
  CHECK(to_dot(g.loss, {}) == to_dot(g.loss));
  CHECK(count(to_dot(g.loss), "data ") == 0);
}

namespace {

// The JSON blob to_html embeds.
nlohmann::json page_data(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"tape-data\">";
  const size_t from = html.find(open);
  REQUIRE(from != std::string::npos);
  const size_t to = html.find("</script>", from);
  REQUIRE(to != std::string::npos);
  return nlohmann::json::parse(html.substr(from + open.size(), to - from - open.size()));
}

std::vector<std::string> lines_of(const nlohmann::json& j) { return j.get<std::vector<std::string>>(); }

}  // namespace

TEST_CASE("to_html: one self-contained page whose steps are what backward did", "[graph]") {
  RetainValuesGuard keep;
  Graph g;
  g.w.set_name("w</script><b>&");  // a user string: must stay text
  g.loss.backward();
  const auto e = tape_entries(g.loss);  // mul, sum, add_scalar, pow
  const std::string html = to_html(g.loss, "graph <of> \"loss\" & @DATA@");
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("<title>graph &lt;of&gt; &quot;loss&quot; &amp; @DATA@</title>") != std::string::npos);
  CHECK(count(html, "</script>") == 2);       // the data blob and the script: no name ends them early
  CHECK(count(html, "w</script>") == 0);
  CHECK(html.find("<link") == std::string::npos);  // nothing fetched
  CHECK(html.find(" src=") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);

  const nlohmann::json d = page_data(html);
  CHECK(d["values_kept"] == true);
  CHECK(d["grads_kept"] == true);
  const auto& nodes = d["nodes"];
  REQUIRE(nodes.size() == 6);  // 4 entries, w, x
  auto node_titled = [&](const std::string& title) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (nodes[i]["title"] == title) return static_cast<int>(i);
    FAIL("no node titled " << title);
    return -1;
  };
  const int pow_i = node_titled(fmt::format("#{} pow", e[3]->seq()));
  const int mul_i = node_titled(fmt::format("#{} mul", e[0]->seq()));
  const int w_i = node_titled("w</script><b>&");
  const int x_i = node_titled("const x");
  CHECK(lines_of(nodes[pow_i]["value"]) == std::vector<std::string>{"data 841"});
  CHECK(lines_of(nodes[x_i]["value"]) == std::vector<std::string>{"data [4, 5, 6]"});
  // the layout: the leaves sit above the entry that uses them, no two nodes of a row overlap
  CHECK(nodes[w_i]["y"].get<double>() < nodes[mul_i]["y"].get<double>());
  CHECK(nodes[mul_i]["y"].get<double>() < nodes[pow_i]["y"].get<double>());
  for (size_t a = 0; a < nodes.size(); ++a)
    for (size_t b = a + 1; b < nodes.size(); ++b)
      if (nodes[a]["y"] == nodes[b]["y"]) {
        const double ax = nodes[a]["x"], aw = nodes[a]["w"], bx = nodes[b]["x"], bw = nodes[b]["w"];
        CHECK((ax + aw <= bx || bx + bw <= ax));
      }
  // the steps: 0 = the root holds dL/dL = 1, then pow, add_scalar, sum, mul
  const auto& steps = d["steps"];
  REQUIRE(steps.size() == 5);
  CHECK(steps[0]["entry"] == pow_i);
  CHECK(lines_of(steps[0]["totals"][0]["lines"]) == std::vector<std::string>{"grad 1"});
  CHECK(steps[1]["entry"] == pow_i);
  CHECK(lines_of(steps[1]["received"]) == std::vector<std::string>{"grad 1"});
  CHECK(lines_of(steps[1]["adds"][0]["lines"]) == std::vector<std::string>{"+ 58"});
  const auto& last = steps[4];
  CHECK(last["entry"] == mul_i);
  REQUIRE(last["adds"].size() == 1);  // x is a constant: nothing added to it
  const auto& edge = d["edges"][last["adds"][0]["edge"].get<int>()];
  CHECK(edge["from"] == w_i);
  CHECK(edge["to"] == mul_i);
  CHECK(lines_of(last["adds"][0]["lines"]) == std::vector<std::string>{"+ [232, 290, 348]"});
  CHECK(last["totals"][0]["node"] == w_i);
  CHECK(lines_of(last["totals"][0]["lines"]) == std::vector<std::string>{"grad [232, 290, 348]"});
}

TEST_CASE("to_html says why each step adds what it adds: the local rule with its numbers", "[graph]") {
  RetainValuesGuard keep;
  auto leaf = [](double v, const char* name) {
    Tensor t = scalar_tensor(v, Options(kFloat64).requires_grad());
    t.set_name(name);
    return t;
  };
  // chapter 2's neuron: o = tanh(x1·w1 + x2·w2 + b)
  Tensor x1 = leaf(1.5, "x1"), w1 = leaf(-0.8, "w1"), x2 = leaf(-2.0, "x2"), w2 = leaf(0.4, "w2"), b = leaf(0.5, "b");
  Tensor o = tanh(x1 * w1 + x2 * w2 + b);
  o.backward();
  const nlohmann::json d = page_data(to_html(o));
  std::vector<std::string> rules;
  for (const auto& step : d["steps"])
    for (const auto& a : step["adds"]) rules.push_back(a["rule"].get<std::string>());
  INFO(nlohmann::json(rules).dump(1));
  auto has = [&](const std::string& r) { return std::find(rules.begin(), rules.end(), r) != rules.end(); };
  CHECK(has("grad × (1 − out²) = 1 × 0.1807 = 0.1807"));   // tanh, from its output
  CHECK(has("grad × 1 = 0.1807 × 1 = 0.1807"));             // add passes its gradient on
  CHECK(has("grad × w2 = 0.1807 × 0.4 = 0.07228"));         // mul: times the other input
  CHECK(has("grad × x2 = 0.1807 × (-2) = -0.3614"));
  CHECK(has("grad × w1 = 0.1807 × (-0.8) = -0.1446"));
  // a tensor gradient gets the rule without numbers (the page shows the tensors themselves)
  Graph g;
  g.loss.backward();
  const nlohmann::json t = page_data(to_html(g.loss));
  CHECK(t["steps"][4]["adds"][0]["rule"] == "grad × const x");
  CHECK(t["steps"][1]["adds"][0]["rule"] == "grad × p·x^(p−1) = 1 × 58 = 58");  // pow, one number
}

TEST_CASE("to_html without RetainValuesGuard still steps and says values were not kept", "[graph]") {
  Graph g;
  g.loss.backward();
  const std::string html = to_html(g.loss);
  const nlohmann::json d = page_data(html);
  CHECK(d["values_kept"] == false);
  CHECK(d["grads_kept"] == false);
  CHECK(d["steps"].size() == 5);
  for (const auto& s : d["steps"]) CHECK(s["adds"].empty());
  CHECK(html.find("were not kept") != std::string::npos);
  // a leaf root and an undefined tensor give a page too
  CHECK(page_data(to_html(g.w))["nodes"].size() == 1);
  CHECK(page_data(to_html(Tensor()))["nodes"].empty());
}

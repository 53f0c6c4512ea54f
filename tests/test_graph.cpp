// test_graph.cpp — looking at the tape: tape_entries / tape_string list the entries in recording
// order with their names and inputs; to_dot is valid-looking Graphviz (rendered when `dot` exists).
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <unistd.h>

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

// test_tape_steps.cpp — tape_steps (autograd/tape_steps.h): the steps come oldest first with the names
// tape_string uses, carry their values under RetainValuesGuard, and local_backward returns each input's
// share (summed to its shape, never accumulated, fresh buffers); walking them in reverse with += gives
// backward()'s gradients; using a step after backward() freed it, or a gradient of the wrong shape, is
// one clear error.
#include <catch2/catch.hpp>

#include <map>
#include <ranges>
#include <string>

#include "autograd/node.h"
#include "autograd/tape_steps.h"
#include "autograd/tapegrad.h"

using namespace tapegrad;

namespace {

Tensor param(std::vector<double> v, const Shape& shape, const char* name) {
  Tensor t = tensor(v, shape, Options(kFloat64).requires_grad());
  t.set_name(name);
  return t;
}

bool equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.to_vector<double>() == b.to_vector<double>();
}

// The engine of docs/learn/02b_write_backward.md, with each step's own rule.
std::map<std::string, Tensor> walk(const Tensor& root) {
  const std::vector<TapeStep> steps = tape_steps(root);
  std::map<std::string, Tensor> grad;
  for (const TapeStep& s : steps)
    for (const TapeValue& in : s.inputs)
      if (in.needs_grad) grad[in.name] = zeros(in.shape, in.dtype);
  grad[steps.back().output.name] = ones(root.shape(), root.options());
  for (const TapeStep& s : std::views::reverse(steps)) {
    const std::vector<Tensor> local = s.local_backward(grad[s.output.name]);
    for (size_t i = 0; i < s.inputs.size(); ++i)
      if (s.inputs[i].needs_grad) grad[s.inputs[i].name] = grad[s.inputs[i].name] + local[i];
  }
  return grad;
}

}  // namespace

TEST_CASE("tape_steps lists the entries oldest first with tape_string's names", "[graph][tape_steps]") {
  RetainValuesGuard keep;
  Tensor w = param({1, 2, 3}, {3}, "w");
  Tensor u = tensor({0.5, 0.25, 2}, Options(kFloat64).requires_grad());  // unnamed: leaf0
  Tensor x = tensor({4, 5, 6}, kFloat64).set_name("x");                  // a constant
  Tensor loss = ((w * x + u).sum() - 3.0).pow(2);
  const std::vector<TapeStep> steps = tape_steps(loss);

  REQUIRE(steps.size() == 5);
  const std::vector<std::string> ops = {"mul", "add", "sum", "add_scalar", "pow"};
  for (size_t k = 0; k < steps.size(); ++k) {
    CHECK(steps[k].op == ops[k]);
    CHECK(steps[k].output.name == fmt::format("#{}", steps[k].seq));
    CHECK(steps[k].output.needs_grad);
    if (k > 0) CHECK(steps[k - 1].seq < steps[k].seq);
  }
  CHECK(steps.back().seq == loss.grad_fn()->seq());
  // the same names as tape_string
  const std::string listing = tape_string(loss);
  CHECK(listing.find(fmt::format("add(#{}, leaf0 [3])", steps[0].seq)) != std::string::npos);

  const TapeStep& mul = steps[0];
  REQUIRE(mul.inputs.size() == 2);
  CHECK(mul.inputs[0].name == "w");
  CHECK(mul.inputs[0].needs_grad);
  CHECK(equal(mul.inputs[0].value, w));
  CHECK_FALSE(mul.inputs[0].value.requires_grad());  // detached: a rule computing with it records nothing
  CHECK(mul.inputs[1].name == "const");
  CHECK_FALSE(mul.inputs[1].needs_grad);
  CHECK(equal(mul.inputs[1].value, x));
  CHECK(equal(mul.output.value, tensor({4, 10, 18}, kFloat64)));
  CHECK(steps[1].inputs[0].name == mul.output.name);  // the add reads the mul's output
  CHECK(steps[1].inputs[1].name == "leaf0");
  CHECK(steps[2].output.shape == Shape{});
  CHECK(steps[2].output.dtype == kFloat64);
}

TEST_CASE("tape_steps without RetainValuesGuard: names and shapes, leaves' values only", "[graph][tape_steps]") {
  Tensor a = param({1, 2}, {2}, "a");
  Tensor y = (a * 3.0).sum();
  const std::vector<TapeStep> steps = tape_steps(y);
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].inputs[0].name == "a");
  CHECK(equal(steps[0].inputs[0].value, a));
  CHECK_FALSE(steps[0].output.value.defined());
  CHECK(steps[0].output.shape == Shape{2});
  CHECK(tape_steps(a).empty());  // a leaf has no steps
}

TEST_CASE("tape_steps tells apart two leaves with the same name", "[graph][tape_steps]") {
  Tensor p = param({1}, {1}, "p"), q = param({2}, {1}, "p");
  const std::vector<TapeStep> steps = tape_steps(p * q);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].inputs[0].name == "p");
  CHECK(steps[0].inputs[1].name == "p~2");
  const std::vector<TapeStep> square = tape_steps(p * p);  // the same leaf twice: one name
  CHECK(square[0].inputs[0].name == "p");
  CHECK(square[0].inputs[1].name == "p");
}

TEST_CASE("local_backward returns each input's share in its shape and accumulates nothing", "[graph][tape_steps]") {
  Tensor m = param({1, 2, 3, 4, 5, 6}, {2, 3}, "m");
  Tensor b = param({10, 20, 30}, {3}, "b");
  Tensor z = m + b;  // b is broadcast over the 2 rows
  const std::vector<TapeStep> steps = tape_steps(z);
  REQUIRE(steps.size() == 1);
  const Tensor g = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64);
  const std::vector<Tensor> shares = steps[0].local_backward(g);
  REQUIRE(shares.size() == 2);
  CHECK(equal(shares[0], g));
  CHECK(equal(shares[1], tensor({5, 7, 9}, kFloat64)));  // summed over the rows: broadcasting undone
  CHECK_FALSE(m.grad().defined());                        // nothing accumulated
  CHECK_FALSE(b.grad().defined());
  CHECK_FALSE(shares[0].requires_grad());
  // fresh buffers: changing a share changes neither g nor the other share, and a second call gives the same
  Tensor s0 = shares[0];
  s0.add_(1.0);
  CHECK(equal(g, tensor({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64)));
  CHECK(equal(steps[0].local_backward(g)[0], g));

  // a constant input gets an undefined share
  Tensor c = tensor({2, 2, 2}, kFloat64);
  const std::vector<TapeStep> scaled = tape_steps(b * c);
  const std::vector<Tensor> s = scaled[0].local_backward(ones({3}, kFloat64));
  CHECK(equal(s[0], c));
  CHECK_FALSE(s[1].defined());
}

TEST_CASE("walking the steps in reverse with += gives backward()'s gradients", "[graph][tape_steps]") {
  RetainValuesGuard keep;
  Generator gen(11);
  Tensor X = randn({4, 3}, Options(kFloat64).requires_grad(), &gen).set_name("X");
  Tensor W = randn({3, 2}, Options(kFloat64).requires_grad(), &gen).set_name("W");
  Tensor b = randn({2}, Options(kFloat64).requires_grad(), &gen).set_name("b");
  Tensor h = tanh(matmul(X, W) + b);
  Tensor loss = (h * h + h).mean();  // h is read by two steps, and by one step twice
  const std::map<std::string, Tensor> mine = walk(loss);
  loss.backward();
  for (const Tensor& t : {X, W, b}) {
    INFO(t.name());
    REQUIRE(mine.contains(t.name()));
    const std::vector<double> got = mine.at(t.name()).to_vector<double>(), want = t.grad().to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) CHECK(got[k] == Approx(want[k]).epsilon(1e-12));
  }
}

TEST_CASE("local_backward names the step when backward() freed it or the gradient does not fit",
          "[graph][tape_steps]") {
  Tensor a = param({1, 2}, {2}, "a");
  Tensor y = tanh(a).sum();
  const std::vector<TapeStep> steps = tape_steps(y);
  const std::string tanh_step = fmt::format("#{} tanh", steps[0].seq);
  CHECK_THROWS_WITH(steps[0].local_backward(ones({3}, kFloat64)),
                    Catch::Contains("local_backward of tape step " + tanh_step + ": the gradient is [3] float64, but "
                                    "the step's output is [2] float64"));
  CHECK_THROWS_WITH(steps[0].local_backward(Tensor()), Catch::Contains("the gradient is undefined"));
  y.backward();  // frees what tanh saved
  CHECK_THROWS_WITH(steps[0].local_backward(ones({2}, kFloat64)),
                    Catch::Contains("local_backward of tape step " + tanh_step +
                                    ": a backward() without retain_graph already ran through this step"));
}

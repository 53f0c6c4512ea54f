// test_grad_hooks.cpp — GradReadyHook (autograd/grad_hooks.h): the callback runs once per backward for
// each watched leaf that backward reaches, after the leaf's last contribution (a leaf used twice is
// called with its complete gradient), later layers before earlier ones, never for leaves not reached,
// and not after the hook is gone.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_hooks.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

using namespace tapegrad;

TEST_CASE("GradReadyHook: called once per reached leaf with its complete gradient, last layer first", "[autograd][hooks]") {
  Tensor x = randn({4, 3});
  Tensor w1 = randn({3, 5}, Options().requires_grad()), w2 = randn({5, 2}, Options().requires_grad());
  Tensor unused = randn({2}, Options().requires_grad());
  std::vector<std::string> calls;
  std::vector<std::vector<float>> grads_at_call(3);
  const std::vector<Tensor> leaves{w1, w2, unused};
  GradReadyHook hook(leaves, [&](size_t i) {
    calls.push_back(i == 0 ? "w1" : i == 1 ? "w2" : "unused");
    grads_at_call[i] = leaves[i].grad().to_vector<float>();
  });
  // w1 is used twice (its gradient has two contributions); unused is not reached.
  Tensor h = matmul(x, w1);
  Tensor y = matmul(h + matmul(x, w1) * 0.5, w2);
  sum(y * y).backward();
  REQUIRE(calls == std::vector<std::string>{"w2", "w1"});
  CHECK(grads_at_call[0] == w1.grad().to_vector<float>());  // complete when called
  CHECK(grads_at_call[1] == w2.grad().to_vector<float>());

  // A second backward calls again (the gradient accumulates; the call sees the sum).
  calls.clear();
  sum(matmul(x, w1)).backward();
  CHECK(calls == std::vector<std::string>{"w1"});
  CHECK(grads_at_call[0] == w1.grad().to_vector<float>());

  // backward of a leaf itself
  calls.clear();
  unused.backward(ones({2}));
  CHECK(calls == std::vector<std::string>{"unused"});
}

TEST_CASE("GradReadyHook: two hooks on one leaf are both called, a destroyed hook never", "[autograd][hooks]") {
  Tensor w = randn({3}, Options().requires_grad());
  int a = 0, b = 0;
  {
    GradReadyHook first({w}, [&](size_t) { ++a; });
    {
      GradReadyHook second({w}, [&](size_t) { ++b; });
      sum(w * w).backward();
    }
    sum(w * 3.0).backward();
  }
  sum(w).backward();
  CHECK(a == 2);
  CHECK(b == 1);
  // a non-leaf or a tensor without grad cannot be watched
  CHECK_THROWS_WITH(GradReadyHook({w * 2.0}, [](size_t) {}), Catch::Contains("not a leaf that requires grad"));
  CHECK_THROWS_WITH(GradReadyHook({zeros({2})}, [](size_t) {}), Catch::Contains("not a leaf that requires grad"));
  // a callback that throws aborts the backward like a failing op
  GradReadyHook thrower({w}, [](size_t) { throw Error("hook failed"); });
  CHECK_THROWS_WITH(sum(w * w).backward(), Catch::Contains("hook failed"));
}

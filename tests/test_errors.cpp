// test_errors.cpp — bad inputs throw tapegrad::Error whose message names the op and the
// shapes / dtypes / indices involved.
#include <catch2/catch.hpp>

#include "autograd/tapegrad.h"

using namespace tapegrad;
using Catch::Contains;

TEST_CASE("non-broadcastable shapes name the op and both shapes", "[errors]") {
  Tensor a = zeros({2, 3}), b = zeros({4});
  CHECK_THROWS_AS(a + b, Error);
  CHECK_THROWS_WITH(a + b, Contains("add") && Contains("[2, 3]") && Contains("[4]"));
  CHECK_THROWS_WITH(a * zeros({3, 2}), Contains("mul") && Contains("[2, 3]") && Contains("[3, 2]"));
  CHECK_THROWS_WITH(a - b, Contains("sub"));
  CHECK_THROWS_WITH(a / b, Contains("div"));
  CHECK_THROWS_WITH(lt(a, b), Contains("lt") && Contains("[4]"));
  CHECK_THROWS_WITH(where(ones({2}, kBool), a, b), Contains("where"));
  CHECK_THROWS_WITH(masked_fill(zeros({3}), ones({2, 3}, kBool), 0.0),
                    Contains("masked_fill") && Contains("[2, 3]") && Contains("[3]"));
  // in place: the source may broadcast into the target, never the target grow
  Tensor t = zeros({3});
  CHECK_THROWS_WITH(t.add_(zeros({2, 3})), Contains("add_") && Contains("[2, 3]") && Contains("[3]"));
  CHECK_THROWS_WITH(t.copy_(zeros({4})), Contains("copy_"));
}

TEST_CASE("mixed dtypes name both dtypes", "[errors]") {
  Tensor a = zeros({2}, kFloat32), b = zeros({2}, kFloat64);
  CHECK_THROWS_WITH(a + b, Contains("add") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_WITH(matmul(zeros({2, 2}), zeros({2, 2}, kFloat64)),
                    Contains("matmul") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_WITH(cat({a, b}, 0), Contains("cat") && Contains("float64"));
  CHECK_THROWS_WITH(where(ones({2}, kBool), a, b), Contains("where") && Contains("float64"));
  CHECK_THROWS_WITH(a.mul_(b), Contains("mul_") && Contains("float64"));
  CHECK_THROWS_WITH(arange(2) * a, Contains("mul") && Contains("int64"));
}

TEST_CASE("matmul shape errors name matmul and both shapes", "[errors]") {
  CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({4, 5})), Contains("matmul") && Contains("[2, 3]") && Contains("[4, 5]"));
  CHECK_THROWS_WITH(matmul(zeros({3}), zeros({4})), Contains("matmul") && Contains("[3]") && Contains("[4]"));
  CHECK_THROWS_WITH(matmul(zeros({3}), zeros({4, 5})), Contains("matmul") && Contains("[4, 5]"));
  CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({4})), Contains("matmul") && Contains("[2, 3]"));
  CHECK_THROWS_WITH(matmul(zeros({2, 7, 3}), zeros({2, 4, 5})), Contains("matmul") && Contains("[2, 7, 3]"));
  CHECK_THROWS_WITH(matmul(zeros({2, 1, 3}), zeros({3, 3, 5})), Contains("matmul") && Contains("[2]") && Contains("[3]"));
  CHECK_THROWS_WITH(matmul(scalar_tensor(1), zeros({2})), Contains("matmul"));
  CHECK_THROWS_WITH(matmul(arange(4).reshape({2, 2}), arange(4).reshape({2, 2})), Contains("matmul") && Contains("int64"));
}

TEST_CASE("out-of-range indices name the op and the bad index", "[errors]") {
  Tensor x = zeros({3, 4});
  CHECK_THROWS_WITH(index_select(x, 0, tensor({0, 7, 1}, kInt64)), Contains("index_select") && Contains("7"));
  CHECK_THROWS_WITH(index_select(x, 1, tensor({-1}, kInt64)), Contains("index_select") && Contains("-1"));
  CHECK_THROWS_WITH(index_select(x, 0, tensor({0.0}, kFloat32)), Contains("index_select") && Contains("float32"));
  CHECK_THROWS_WITH(gather(x, 1, tensor({0, 9}, {1, 2}, kInt64)), Contains("gather") && Contains("9"));
  CHECK_THROWS_WITH(gather(x, 1, tensor({0, 1}, kInt64)), Contains("gather") && Contains("[2]"));
  Tensor w = zeros({5, 2});
  CHECK_THROWS_WITH(embedding(w, tensor({1, 10}, kInt64)), Contains("embedding") && Contains("10"));
  CHECK_THROWS_WITH(embedding(w, tensor({1.0}, kFloat32)), Contains("embedding") && Contains("float32"));
  CHECK_THROWS_WITH(embedding(zeros({5}), tensor({1}, kInt64)), Contains("embedding") && Contains("[5]"));
}

TEST_CASE("out-of-range dims name the op and the dim", "[errors]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(sum(x, {2}), Contains("sum") && Contains("dim 2"));
  CHECK_THROWS_WITH(sum(x, {-3}), Contains("sum") && Contains("-3"));
  CHECK_THROWS_WITH(sum(x, {1, -1}), Contains("sum") && Contains("twice"));
  CHECK_THROWS_WITH(softmax(x, 2), Contains("softmax") && Contains("2"));
  CHECK_THROWS_WITH(log_softmax(x, -3), Contains("log_softmax"));
  CHECK_THROWS_WITH(x.transpose(0, 5), Contains("transpose") && Contains("5"));
  CHECK_THROWS_WITH(max(x, 3), Contains("max"));
  CHECK_THROWS_WITH(argmax(x, -4), Contains("argmax"));
  CHECK_THROWS_WITH(logsumexp(x, 2), Contains("max") || Contains("logsumexp"));
  CHECK_THROWS_WITH(cat({x, x}, 2), Contains("cat") && Contains("2"));
  CHECK_THROWS_WITH(stack({x, x}, 4), Contains("stack"));
  CHECK_THROWS_WITH(x.size(2), Contains("size"));
  CHECK_THROWS_WITH(x.unsqueeze(-4), Contains("unsqueeze"));
}

TEST_CASE("impossible views, reshapes and slices name the shapes", "[errors]") {
  Tensor x = zeros({2, 3});
  CHECK_THROWS_WITH(x.view({4, 4}), Contains("view") && Contains("[4, 4]") && Contains("[2, 3]"));
  CHECK_THROWS_WITH(x.reshape({5}), Contains("reshape") && Contains("[5]") && Contains("[2, 3]"));
  CHECK_THROWS_WITH(x.view({-1, -1}), Contains("view") && Contains("-1"));
  CHECK_THROWS_WITH(x.view({-1, 4}), Contains("view") && Contains("[-1, 4]"));
  CHECK_THROWS_WITH(x.t().view({6}), Contains("view") && Contains("[3, 2]") && Contains("reshape"));
  CHECK_THROWS_WITH(x.expand({4, 3}), Contains("expand") && Contains("[2, 3]") && Contains("[4, 3]"));
  CHECK_THROWS_WITH(x.narrow(1, 2, 3), Contains("narrow") && Contains("[2, 3]"));
  CHECK_THROWS_WITH(x.narrow(1, -5, 1), Contains("narrow"));
  CHECK_THROWS_WITH(x.narrow(0, 0, -1), Contains("narrow"));
  CHECK_THROWS_WITH(x.select(0, 2), Contains("select") && Contains("index 2") && Contains("[2, 3]"));
  CHECK_THROWS_WITH(x.select(1, -4), Contains("select") && Contains("-4"));
  CHECK_THROWS_WITH(scalar_tensor(1).select(0, 0), Contains("select") && Contains("0-d"));
  CHECK_THROWS_WITH(x.slice(1, 0, 3, 0), Contains("slice") && Contains("step"));
  CHECK_THROWS_WITH(x.item(), Contains("item") && Contains("[2, 3]"));
  CHECK_THROWS_WITH(empty({2, -1}), Contains("empty") && Contains("-1"));
}

TEST_CASE("cat and stack with mismatched shapes name the offending tensor", "[errors]") {
  CHECK_THROWS_WITH(cat({zeros({2, 3}), zeros({2, 4})}, 0),
                    Contains("cat") && Contains("[2, 3]") && Contains("[2, 4]") && Contains("tensor 1"));
  CHECK_THROWS_WITH(cat({zeros({2, 3}), zeros({2, 3, 1})}, 1), Contains("cat") && Contains("[2, 3, 1]"));
  CHECK_THROWS_WITH(cat({}, 0), Contains("cat"));
  CHECK_THROWS_WITH(cat({scalar_tensor(1), scalar_tensor(2)}, 0), Contains("cat") && Contains("0-d"));
  CHECK_THROWS_WITH(stack({zeros({2}), zeros({3})}, 0), Contains("stack") && Contains("[3]") && Contains("[2]"));
  CHECK_NOTHROW(cat({zeros({2, 3}), zeros({5, 3})}, 0));
}

TEST_CASE("where and masked_fill need a bool condition", "[errors]") {
  Tensor a = zeros({3});
  CHECK_THROWS_WITH(where(ones({3}), a, a), Contains("where") && Contains("bool") && Contains("float32"));
  CHECK_THROWS_WITH(where(arange(3), a, a), Contains("where") && Contains("int64"));
  CHECK_THROWS_WITH(masked_fill(a, ones({3}, kInt32), 1.0), Contains("masked_fill") && Contains("int32"));
}

TEST_CASE("backward on a tensor that needs no grad, or on an undefined one", "[errors]") {
  Tensor x = ones({3});
  Tensor y = (x * 2.0).sum();
  CHECK_THROWS_WITH(y.backward(), Contains("backward") && Contains("does not require grad"));
  CHECK_THROWS_WITH(Tensor().backward(), Contains("backward") && Contains("undefined"));
  Tensor w = ones({3}, Options().requires_grad());
  CHECK_THROWS_WITH((w * 2.0).backward(), Contains("backward") && Contains("[3]"));
  CHECK_THROWS_WITH((w * 2.0).sum().backward(ones({2})), Contains("backward") && Contains("[2]"));
}

TEST_CASE("float-only ops reject integer tensors, naming the op and the dtype", "[errors]") {
  Tensor i = arange(3);
  CHECK_THROWS_WITH(exp(i), Contains("exp") && Contains("int64"));
  CHECK_THROWS_WITH(log(i), Contains("log") && Contains("int64"));
  CHECK_THROWS_WITH(sigmoid(from_vector<int32_t>({1}, {1})), Contains("sigmoid") && Contains("int32"));
  CHECK_THROWS_WITH(softmax(i, 0), Contains("softmax") && Contains("int64"));
  CHECK_THROWS_WITH(mean(i), Contains("mean") && Contains("int64"));
  CHECK_THROWS_WITH(pow(i, 2), Contains("pow") && Contains("int64"));
  CHECK_THROWS_WITH(i.requires_grad_(), Contains("requires_grad_") && Contains("int64"));
  CHECK_THROWS_WITH(i.mul_(2.0), Contains("mul_") && Contains("int64"));
}

TEST_CASE("gradcheck refuses inputs whose elements alias", "[errors][gradcheck]") {
  auto fn = [](const std::vector<Tensor>& in) { return in[0].sum(); };
  // stride 0 (expanded)
  Tensor e = randn({3, 1}, kFloat64).expand({3, 4}).detach().requires_grad_();
  REQUIRE_THROWS_WITH(gradcheck(fn, {e}), Catch::Contains("overlapping memory"));
  // a step smaller than the inner span: rows of 3 elements starting every 2 elements
  Tensor base = randn({10}, kFloat64);
  Tensor rows = make_view(base, {4, 3}, {2, 1}, 0).requires_grad_();
  REQUIRE_THROWS_WITH(gradcheck(fn, {rows}), Catch::Contains("overlapping memory"));
  // two inputs over one storage
  Tensor x = randn({3, 3}, kFloat64).requires_grad_();
  Tensor xt = x.detach().t().requires_grad_();
  REQUIRE_THROWS_WITH(gradcheck([](const std::vector<Tensor>& in) { return (in[0] * in[1]).sum(); }, {x, xt}),
                      Catch::Contains("share storage"));
  // a transposed (non-overlapping) leaf is fine
  Tensor t = randn({4, 3}, kFloat64).t().requires_grad_();
  CHECK(gradcheck(fn, {t}).ok);
}

TEST_CASE("device names: cpu, cuda, cuda:N, and anything else is refused naming it", "[errors]") {
  CHECK(parse_device("cpu").type == DeviceType::CPU);
  CHECK(parse_device("cuda").index == 0);
  CHECK(parse_device("cuda:3").index == 3);
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU", "cuda:99999999999", "cuda:0000000000001"})
    CHECK_THROWS_WITH(parse_device(bad), Contains(std::string("'") + bad + "' is not a device"));
}

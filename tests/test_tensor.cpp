// test_tensor.cpp — tensor creation, dtypes, item()/to_vector() conversions, printing, and the
// random Generator (reproducibility, distributions, and cross-machine determinism of the bits).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

using namespace tapegrad;

TEST_CASE("zeros, ones and full fill every element with the value and dtype asked for", "[tensor]") {
  Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == kFloat32);
  CHECK(z.numel() == 6);
  CHECK(z.dim() == 2);
  CHECK(z.is_contiguous());
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));

  Tensor o = ones({4}, kFloat64);
  CHECK(o.dtype() == kFloat64);
  CHECK(o.to_vector<double>() == std::vector<double>(4, 1.0));

  Tensor f = full({2, 2}, 7.5, kFloat64);
  CHECK(f.to_vector<double>() == std::vector<double>(4, 7.5));
  Tensor fi = full({3}, -2.9, kInt32);  // converted to int: truncates toward zero
  CHECK(fi.dtype() == kInt32);
  CHECK(fi.to_vector<int32_t>() == std::vector<int32_t>{-2, -2, -2});

  Tensor e = empty({0, 5});
  CHECK(e.numel() == 0);
  CHECK(e.to_vector<float>().empty());
  Tensor e2 = empty({3, 2}, kInt64);
  CHECK(e2.shape() == Shape{3, 2});
  CHECK(e2.dtype() == kInt64);

  Tensor zl = zeros_like(f);
  CHECK(zl.shape() == f.shape());
  CHECK(zl.dtype() == kFloat64);
  CHECK(zl.to_vector<double>() == std::vector<double>(4, 0.0));
  CHECK(ones_like(fi).to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1});

  Tensor r = ones({2}, Options(kFloat64).requires_grad());
  CHECK(r.requires_grad());
  CHECK(r.is_leaf());
}

TEST_CASE("arange follows start-to-end (exclusive) with a step, int64 by default", "[tensor]") {
  Tensor a = arange(5);
  CHECK(a.dtype() == kInt64);
  CHECK(a.shape() == Shape{5});
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(2, 11, 3).to_vector<int64_t>() == std::vector<int64_t>{2, 5, 8});
  CHECK(arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
  CHECK(arange(3, 3).numel() == 0);
  CHECK(arange(0, 1, 0.25, kFloat64).to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75});
  CHECK_THROWS_AS(arange(0, 1, 0), Error);
}

TEST_CASE("tensor() and from_vector() hold the given values in the given shape and dtype", "[tensor]") {
  Tensor t = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK(tensor({1.5, -2.5}).dtype() == kFloat32);
  CHECK(tensor({1.5, -2.5}).to_vector<float>() == std::vector<float>{1.5f, -2.5f});
  CHECK(tensor({0, 2, 0}, kBool).to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 0});
  CHECK_THROWS_AS(tensor({1, 2, 3}, {2, 2}), Error);

  CHECK(from_vector<float>({1.f, 2.f}, {2}).dtype() == kFloat32);
  CHECK(from_vector<double>({1, 2}, {2, 1}).dtype() == kFloat64);
  Tensor i32 = from_vector<int32_t>({-1, 7, 9}, {3});
  CHECK(i32.dtype() == kInt32);
  CHECK(i32.to_vector<int32_t>() == std::vector<int32_t>{-1, 7, 9});
  Tensor i64 = from_vector<int64_t>({int64_t{1} << 40, 3}, {2});
  CHECK(i64.dtype() == kInt64);
  CHECK(i64.to_vector<int64_t>()[0] == (int64_t{1} << 40));
  Tensor g = from_vector<double>({1, 2, 3}, {3}, /*requires_grad=*/true);
  CHECK(g.requires_grad());
  CHECK_THROWS_AS(from_vector<float>({1.f}, {2}), Error);
}

TEST_CASE("scalar_tensor is 0-d and item() reads one element", "[tensor]") {
  Tensor s = scalar_tensor(3.25, kFloat64);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.shape() == Shape{});
  CHECK(s.item() == 3.25);
  CHECK(s.item<float>() == 3.25f);
  CHECK(s.item<int64_t>() == 3);
  CHECK(tensor({-7}, kInt32).item<int>() == -7);
  CHECK(tensor({1, 2, 3}, {1, 3, 1}).select(1, 2).item() == 3.0);
  CHECK_THROWS_AS(tensor({1, 2}).item(), Error);
}

TEST_CASE("to_vector<T> converts between every dtype, and so does to(dtype)", "[tensor]") {
  Tensor f = tensor({-1.75, 0.0, 2.5, 3.99}, kFloat64);
  CHECK(f.to_vector<float>() == std::vector<float>{-1.75f, 0.0f, 2.5f, 3.99f});
  CHECK(f.to_vector<int32_t>() == std::vector<int32_t>{-1, 0, 2, 3});
  CHECK(f.to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 2, 3});
  CHECK(f.to_vector<uint8_t>() == std::vector<uint8_t>{1, 0, 1, 1});

  Tensor i = arange(4);
  CHECK(i.to_vector<double>() == std::vector<double>{0, 1, 2, 3});
  CHECK(i.to(kFloat32).dtype() == kFloat32);
  CHECK(i.to(kFloat32).to_vector<float>() == std::vector<float>{0, 1, 2, 3});
  CHECK(i.to(kBool).to_vector<uint8_t>() == std::vector<uint8_t>{0, 1, 1, 1});
  CHECK(tensor({1, 0, 1}, kBool).to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(f.to(kInt32).to_vector<int32_t>() == std::vector<int32_t>{-1, 0, 2, 3});
  // converting to the same dtype is free
  CHECK(f.to(kFloat64).storage().get() == f.storage().get());
  // non-contiguous source: values come back in row-major order of the view
  Tensor m = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, kFloat64).t();
  CHECK(m.to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(m.to_vector<int64_t>() == std::vector<int64_t>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("printing a small tensor gives the exact text", "[tensor][format]") {
  CHECK(fmt::format("{}", tensor({1, 2.5}, kFloat32)) == "tensor([1.0000, 2.5000], dtype=float32)");
  CHECK(fmt::format("{}", tensor({1, 2, 3, 4}, {2, 2}, kFloat64)) ==
        "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]], dtype=float64)");
  CHECK(fmt::format("{}", arange(3)) == "tensor([0, 1, 2], dtype=int64)");
  CHECK(fmt::format("{}", scalar_tensor(-0.5, kFloat64)) == "tensor(-0.5000, dtype=float64)");
  CHECK(fmt::format("{}", tensor({1, 2}, Options(kFloat64).requires_grad())) ==
        "tensor([1.0000, 2.0000], dtype=float64, requires_grad=true)");
  // a transposed view prints in its own (logical) order
  CHECK(fmt::format("{}", tensor({1, 2, 3, 4}, {2, 2}).t()) ==
        "tensor([[1.0000, 3.0000],\n        [2.0000, 4.0000]], dtype=float32)");
  CHECK(fmt::format("{}", Tensor()) == "tensor(undefined)");
}

TEST_CASE("printing a big tensor summarizes it with ...", "[tensor][format]") {
  const std::string s = fmt::format("{}", arange(2000));
  CHECK(s == "tensor([0, 1, 2, ..., 1997, 1998, 1999], dtype=int64)");
  const std::string m = fmt::format("{}", arange(100 * 100).reshape({100, 100}));
  CHECK(m.find("...") != std::string::npos);
  CHECK(m.size() < 1000);
  CHECK(m.find("9999") != std::string::npos);  // the last element is shown
  CHECK(m.find("5050") == std::string::npos);  // a middle element is not
  // at or under the threshold nothing is elided
  CHECK(fmt::format("{}", arange(1000)).find("...") == std::string::npos);
}

TEST_CASE("Generator: the same seed gives the same numbers, a different seed different ones", "[tensor][random]") {
  Generator a(123), b(123), c(124);
  std::vector<uint64_t> va, vb, vc;
  for (int i = 0; i < 16; ++i) va.push_back(a.next_u64()), vb.push_back(b.next_u64()), vc.push_back(c.next_u64());
  CHECK(va == vb);
  CHECK(va != vc);

  // manual_seed rewinds; state()/set_state() restore exactly (including the spare normal)
  a.manual_seed(123);
  CHECK(a.next_u64() == va[0]);
  Generator g(5);
  (void)g.normal();  // leaves a spare
  const Generator::State st = g.state();
  const double n1 = g.normal(), n2 = g.normal();
  g.set_state(st);
  CHECK(g.normal() == n1);
  CHECK(g.normal() == n2);

  // tensors from an explicit generator
  Generator g1(9), g2(9);
  CHECK(randn({50}, kFloat64, &g1).to_vector<double>() == randn({50}, kFloat64, &g2).to_vector<double>());

  // the global generator: manual_seed makes rand/randn reproducible
  manual_seed(77);
  const std::vector<float> r1 = rand({10}).to_vector<float>();
  const std::vector<float> n_1 = randn({10}).to_vector<float>();
  manual_seed(77);
  CHECK(rand({10}).to_vector<float>() == r1);
  CHECK(randn({10}).to_vector<float>() == n_1);
  CHECK(rand({10}).to_vector<float>() != r1);  // the stream moved on
}

TEST_CASE("Generator(42) gives the reference xoshiro256** bits on every machine", "[tensor][random]") {
  // Computed independently (Python, from the published splitmix64 and xoshiro256** algorithms):
  // state = 4 successive splitmix64 outputs from x = 42; output = rotl(s1 * 5, 7) * 9.
  Generator g(42);
  CHECK(g.next_u64() == 0x15780b2e0c2ec716ull);
  CHECK(g.next_u64() == 0x6104d9866d113a7eull);
  CHECK(g.next_u64() == 0xae17533239e499a1ull);
  CHECK(g.next_u64() == 0xecb8ad4703b360a1ull);
  // uniform() = top 53 bits / 2^53 of the same stream
  Generator u(42);
  CHECK(u.uniform() == Approx(0.08386297105988216).epsilon(1e-15));
  CHECK(u.uniform() == Approx(0.3789802506626686).epsilon(1e-15));
}

TEST_CASE("rand is in 0 (inclusive) to 1 (exclusive) and uniform-looking", "[tensor][random]") {
  Generator g(1);
  const std::vector<double> v = rand({100000}, kFloat64, &g).to_vector<double>();
  double mean = 0, lo = 1, hi = 0;
  for (double x : v) mean += x, lo = std::min(lo, x), hi = std::max(hi, x);
  mean /= v.size();
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(lo < 0.001);
  CHECK(hi > 0.999);
  CHECK(mean == Approx(0.5).margin(0.01));
}

TEST_CASE("randn has mean ~0 and std ~1 over 100k draws", "[tensor][random]") {
  Generator g(2);
  const std::vector<double> v = randn({100000}, kFloat64, &g).to_vector<double>();
  double mean = 0, sq = 0;
  int beyond3 = 0;
  for (double x : v) mean += x;
  mean /= v.size();
  for (double x : v) sq += (x - mean) * (x - mean), beyond3 += std::abs(x) > 3;
  const double sd = std::sqrt(sq / (v.size() - 1));
  CHECK(mean == Approx(0.0).margin(0.015));
  CHECK(sd == Approx(1.0).margin(0.015));
  CHECK(beyond3 > 150);  // ≈ 0.27% of 100k = 270 in the tails
  CHECK(beyond3 < 400);
}

TEST_CASE("trunc_normal stays within its bounds and randint within its range", "[tensor][random]") {
  Generator g(3);
  const std::vector<double> t = trunc_normal({20000}, 1.0, 2.0, -0.5, 2.0, kFloat64, &g).to_vector<double>();
  double lo = 1e9, hi = -1e9;
  for (double x : t) lo = std::min(lo, x), hi = std::max(hi, x);
  CHECK(lo >= -0.5);
  CHECK(hi <= 2.0);
  CHECK(lo < -0.45);
  CHECK(hi > 1.95);
  CHECK_THROWS_AS(trunc_normal({2}, 0, 1, 1, -1), Error);

  const Tensor r = randint(-3, 4, {10000}, kInt64, &g);
  CHECK(r.dtype() == kInt64);
  std::vector<int> counts(7, 0);
  for (int64_t x : r.to_vector<int64_t>()) {
    REQUIRE(x >= -3);
    REQUIRE(x < 4);
    ++counts[x + 3];
  }
  for (int c : counts) CHECK(c > 1200);  // every value appears, ≈ 1428 each
  CHECK(randint(0, 10, {5}, kInt32, &g).dtype() == kInt32);
  CHECK_THROWS_AS(randint(5, 5, {2}), Error);
}

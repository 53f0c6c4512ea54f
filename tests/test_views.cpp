// test_views.cpp — view ops share storage and get the right shape/strides/offset:
// transpose, permute, slice, narrow, select, expand, unsqueeze, squeeze, view vs reshape,
// contiguous, flatten, t().
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

using namespace tapegrad;

namespace {
// [0, 1, ..., n-1] as float64 with the given shape.
Tensor iota(const Shape& shape) { return arange(0, static_cast<double>(shape.numel()), 1, kFloat64).reshape(shape); }
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("writing through a view changes the base", "[views]") {
  Tensor base = zeros({3, 4}, kFloat64);
  Tensor col = base.select(1, 2);  // column 2
  REQUIRE(col.storage().get() == base.storage().get());
  col.fill_(5.0);
  CHECK(vals(base) == std::vector<double>{0, 0, 5, 0, 0, 0, 5, 0, 0, 0, 5, 0});

  Tensor tr = base.t();
  tr.select(0, 0).add_(1.0);  // column 0 of base
  CHECK(vals(base) == std::vector<double>{1, 0, 5, 0, 1, 0, 5, 0, 1, 0, 5, 0});

  Tensor s = base.slice(1, 1, 4, 2);  // columns 1, 3
  s.copy_(tensor({7, 8}, kFloat64));   // broadcast over rows
  CHECK(vals(base) == std::vector<double>{1, 7, 5, 8, 1, 7, 5, 8, 1, 7, 5, 8});
  // the write bumps the shared storage's version
  const uint64_t v = base.storage()->version();
  base.view({12}).mul_(2.0);
  CHECK(base.storage()->version() == v + 1);
  CHECK(vals(base)[1] == 14.0);
}

TEST_CASE("transpose and t() swap shape and strides, no copy", "[views]") {
  Tensor x = iota({2, 3, 4});
  Tensor y = x.transpose(0, 2);
  CHECK(y.shape() == Shape{4, 3, 2});
  CHECK(y.strides() == Shape{1, 4, 12});
  CHECK(y.offset() == 0);
  CHECK(y.storage().get() == x.storage().get());
  CHECK_FALSE(y.is_contiguous());
  CHECK(x.transpose(-1, -3).strides() == Shape{1, 4, 12});
  // y[i][j][k] == x[k][j][i]
  CHECK(y.select(0, 3).select(0, 1).to_vector<double>() == std::vector<double>{7, 19});

  Tensor m = iota({2, 3});
  Tensor mt = m.t();
  CHECK(mt.shape() == Shape{3, 2});
  CHECK(mt.strides() == Shape{1, 3});
  CHECK(vals(mt) == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK_THROWS_AS(x.t(), Error);
}

TEST_CASE("permute reorders dims and strides", "[views]") {
  Tensor x = iota({2, 3, 4});
  Tensor p = x.permute({1, 2, 0});
  CHECK(p.shape() == Shape{3, 4, 2});
  CHECK(p.strides() == Shape{4, 1, 12});
  CHECK(p.storage().get() == x.storage().get());
  // p[i][j][k] = x[k][i][j] = 12k + 4i + j
  std::vector<double> want;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 2; ++k) want.push_back(12 * k + 4 * i + j);
  CHECK(vals(p) == want);
  CHECK(x.permute({-1, 0, 1}).shape() == Shape{4, 2, 3});
  CHECK_THROWS_AS(x.permute({0, 0, 1}), Error);
  CHECK_THROWS_AS(x.permute({0, 1}), Error);
}

TEST_CASE("slice: step, negative indices and clamping", "[views]") {
  Tensor x = iota({10});
  Tensor s = x.slice(0, 1, 8, 3);  // 1, 4, 7
  CHECK(s.shape() == Shape{3});
  CHECK(s.strides() == Shape{3});
  CHECK(s.offset() == 1);
  CHECK(vals(s) == std::vector<double>{1, 4, 7});
  CHECK(vals(x.slice(0, 1, 9, 3)) == std::vector<double>{1, 4, 7});   // end not on the grid
  CHECK(vals(x.slice(0, -3, 10)) == std::vector<double>{7, 8, 9});    // negative start
  CHECK(vals(x.slice(0, 2, -6)) == std::vector<double>{2, 3});        // negative end
  CHECK(vals(x.slice(0, -100, 2)) == std::vector<double>{0, 1});      // clamped start
  CHECK(vals(x.slice(0, 8, 100)) == std::vector<double>{8, 9});       // clamped end
  CHECK(x.slice(0, 6, 3).numel() == 0);                               // empty, not negative
  CHECK(x.slice(0, 6, 3).shape() == Shape{0});
  CHECK(x.slice(0, 20, 30).numel() == 0);
  CHECK_THROWS_AS(x.slice(0, 0, 5, 0), Error);
  CHECK_THROWS_AS(x.slice(0, 0, 5, -1), Error);

  Tensor m = iota({4, 6});
  Tensor ms = m.slice(1, 1, 6, 2).slice(0, 1, 3);  // rows 1-2, columns 1,3,5
  CHECK(ms.shape() == Shape{2, 3});
  CHECK(ms.strides() == Shape{6, 2});
  CHECK(ms.offset() == 7);
  CHECK(vals(ms) == std::vector<double>{7, 9, 11, 13, 15, 17});
  CHECK(ms.storage().get() == m.storage().get());
}

TEST_CASE("narrow and select", "[views]") {
  Tensor m = iota({3, 4});
  Tensor n = m.narrow(1, 1, 2);
  CHECK(n.shape() == Shape{3, 2});
  CHECK(n.strides() == Shape{4, 1});
  CHECK(n.offset() == 1);
  CHECK(vals(n) == std::vector<double>{1, 2, 5, 6, 9, 10});
  CHECK(vals(m.narrow(0, -1, 1)) == std::vector<double>{8, 9, 10, 11});
  CHECK(m.narrow(1, 4, 0).numel() == 0);

  Tensor r = m.select(0, 1);
  CHECK(r.shape() == Shape{4});
  CHECK(r.offset() == 4);
  CHECK(vals(r) == std::vector<double>{4, 5, 6, 7});
  Tensor c = m.select(1, -1);
  CHECK(c.shape() == Shape{3});
  CHECK(c.strides() == Shape{4});
  CHECK(c.offset() == 3);
  CHECK(vals(c) == std::vector<double>{3, 7, 11});
  CHECK(m.select(0, 2).select(0, 3).dim() == 0);
  CHECK(m.select(0, 2).select(0, 3).item() == 11.0);
}

TEST_CASE("expand gives stride 0 on broadcast dims", "[views]") {
  Tensor x = iota({3, 1});
  Tensor e = x.expand({2, 3, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.strides() == Shape{0, 1, 0});
  CHECK(e.storage().get() == x.storage().get());
  CHECK(vals(e) == std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
  CHECK(x.expand({-1, 5}).shape() == Shape{3, 5});
  CHECK(x.expand({-1, 5}).strides() == Shape{1, 0});
  CHECK_THROWS_AS(x.expand({4, 4}), Error);
  CHECK_THROWS_AS(x.expand({3}), Error);
  // summing an expanded view counts every repeat
  CHECK(e.sum().item() == Approx(2 * 4 * (0 + 1 + 2)));
}

TEST_CASE("unsqueeze and squeeze", "[views]") {
  Tensor x = iota({2, 3});
  Tensor u0 = x.unsqueeze(0), u1 = x.unsqueeze(1), u2 = x.unsqueeze(-1);
  CHECK(u0.shape() == Shape{1, 2, 3});
  CHECK(u1.shape() == Shape{2, 1, 3});
  CHECK(u1.strides()[0] == 3);
  CHECK(u1.strides()[2] == 1);
  CHECK(u2.shape() == Shape{2, 3, 1});
  CHECK(u1.storage().get() == x.storage().get());
  CHECK(vals(u1) == vals(x));
  CHECK_THROWS_AS(x.unsqueeze(4), Error);

  Tensor y = iota({1, 3, 1, 2});
  CHECK(y.squeeze().shape() == Shape{3, 2});
  CHECK(y.squeeze(0).shape() == Shape{3, 1, 2});
  CHECK(y.squeeze(-2).shape() == Shape{1, 3, 2});
  CHECK(y.squeeze(1).shape() == Shape{1, 3, 1, 2});  // size 3: unchanged
  CHECK(vals(y.squeeze()) == vals(y));
  CHECK(y.squeeze().storage().get() == y.storage().get());
  // on a non-contiguous tensor the kept strides are the original ones
  Tensor z = iota({3, 1, 4}).transpose(0, 2);  // [4, 1, 3], strides [1, 4, 4]
  CHECK(z.squeeze(1).strides() == Shape{1, 4});
}

TEST_CASE("view never copies, reshape copies only when a view is impossible", "[views]") {
  Tensor x = iota({2, 3, 4});
  Tensor v = x.view({6, 4});
  CHECK(v.storage().get() == x.storage().get());
  CHECK(v.strides() == Shape{4, 1});
  CHECK(x.view({-1}).shape() == Shape{24});
  CHECK(x.view({4, -1, 2}).shape() == Shape{4, 3, 2});

  // a slice that keeps rows contiguous can still be viewed
  Tensor rows = x.slice(0, 1, 2);  // [1, 3, 4]
  Tensor rv = rows.view({12});
  CHECK(rv.storage().get() == x.storage().get());
  CHECK(rv.offset() == 12);
  CHECK(vals(rv)[0] == 12.0);

  // a transposed tensor: merging the swapped dims is impossible without a copy
  Tensor t = x.transpose(1, 2);  // [2, 4, 3]
  CHECK_THROWS_AS(t.view({2, 12}), Error);
  Tensor r = t.reshape({2, 12});
  CHECK(r.storage().get() != x.storage().get());
  CHECK(r.is_contiguous());
  std::vector<double> want;
  for (int a = 0; a < 2; ++a)
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 3; ++j) want.push_back(12 * a + 4 * j + k);
  CHECK(vals(r) == want);
  // ...but splitting / merging dims that stay contiguous works as a view
  Tensor tv = t.reshape({2, 2, 2, 3});  // splits the size-4 dim (stride 1)
  CHECK(tv.storage().get() == x.storage().get());
  CHECK(tv.strides() == Shape{12, 2, 1, 4});
  CHECK(vals(tv) == vals(t));
  // merging a permuted pair of dims (strides 12 then 1, not 4·…) needs a copy; the plain tensor does not
  Tensor p = x.permute({1, 0, 2});  // [3, 2, 4], strides [4, 12, 1]
  CHECK(p.reshape({3, 8}).storage().get() != x.storage().get());
  CHECK(x.reshape({24}).storage().get() == x.storage().get());
  // expanded tensor: a view is impossible for merging broadcast with real dims
  Tensor e = iota({3, 1}).expand({3, 4});
  Tensor er = e.reshape({12});
  CHECK(vals(er) == std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2});
}

TEST_CASE("contiguous returns the same tensor when already contiguous, a copy otherwise", "[views]") {
  Tensor x = iota({3, 4});
  Tensor c = x.contiguous();
  CHECK(c.storage().get() == x.storage().get());
  CHECK(c.impl() == x.impl());
  Tensor t = x.t();
  Tensor tc = t.contiguous();
  CHECK(tc.storage().get() != x.storage().get());
  CHECK(tc.is_contiguous());
  CHECK(tc.strides() == Shape{3, 1});
  CHECK(vals(tc) == vals(t));
  // the copy is independent of the base
  tc.fill_(0);
  CHECK(vals(x)[1] == 1.0);
  // size-1 dims do not matter for contiguity
  Tensor u = x.select(1, 0).unsqueeze(1);  // [3, 1] with stride 4
  CHECK_FALSE(u.is_contiguous());
  Tensor row = x.select(0, 1).unsqueeze(0);  // [1, 4] stride (anything, 1)
  CHECK(row.is_contiguous());
  CHECK(row.contiguous().storage().get() == x.storage().get());
  // clone always copies
  CHECK(x.clone().storage().get() != x.storage().get());
  CHECK(vals(x.clone()) == vals(x));
}

TEST_CASE("flatten merges a range of dims", "[views]") {
  Tensor x = iota({2, 3, 4, 5});
  CHECK(x.flatten().shape() == Shape{120});
  CHECK(x.flatten(1).shape() == Shape{2, 60});
  CHECK(x.flatten(1, 2).shape() == Shape{2, 12, 5});
  CHECK(x.flatten(-2, -1).shape() == Shape{2, 3, 20});
  CHECK(x.flatten(1, 2).storage().get() == x.storage().get());
  CHECK(scalar_tensor(3).flatten().shape() == Shape{1});
  CHECK_THROWS_AS(x.flatten(2, 1), Error);
  Tensor t = iota({2, 3}).t();
  CHECK(vals(t.flatten()) == std::vector<double>{0, 3, 1, 4, 2, 5});
}

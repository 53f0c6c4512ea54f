// test_forward.cpp — forward values of every op against independently computed values (naive
// float64 loops or hand-computed): elementwise with broadcasting, unary ops, comparisons/where,
// reductions (incl. non-contiguous input and the threaded paths), softmax, matmul, joins, indexing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "autograd/tapegrad.h"
#include "tests/thread_count.h"

using namespace tapegrad;

namespace {

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

Tensor rnd(const Shape& shape, uint64_t seed, DType dt = kFloat64) {
  Generator g(seed);
  return randn(shape, dt, &g);
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    CHECK(got[i] == Approx(want[i]).epsilon(tol).margin(tol));
  }
}

using Threads = testing::ThreadCount;

// Naive C[M, N] = A[M, K] B[K, N] with explicit element strides, in float64.
std::vector<double> naive_mm(const std::vector<double>& A, int64_t ars, int64_t acs, const std::vector<double>& B,
                             int64_t brs, int64_t bcs, int64_t M, int64_t K, int64_t N, int64_t aoff = 0,
                             int64_t boff = 0) {
  std::vector<double> C(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += A[aoff + i * ars + k * acs] * B[boff + k * brs + j * bcs];
      C[i * N + j] = s;
    }
  return C;
}

}  // namespace

TEST_CASE("binary ops broadcast like NumPy", "[forward]") {
  Tensor a = rnd({2, 3, 1}, 1), b = rnd({4}, 2) + 3.0;  // b away from 0 for div
  const auto av = vals(a), bv = vals(b);
  const std::vector<std::pair<std::function<Tensor(const Tensor&, const Tensor&)>, std::function<double(double, double)>>>
      ops = {{[](auto& x, auto& y) { return x + y; }, [](double x, double y) { return x + y; }},
             {[](auto& x, auto& y) { return x - y; }, [](double x, double y) { return x - y; }},
             {[](auto& x, auto& y) { return x * y; }, [](double x, double y) { return x * y; }},
             {[](auto& x, auto& y) { return x / y; }, [](double x, double y) { return x / y; }}};
  for (const auto& [op, ref] : ops) {
    Tensor y = op(a, b);
    REQUIRE(y.shape() == Shape{2, 3, 4});
    std::vector<double> want;
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 4; ++j) want.push_back(ref(av[i], bv[j]));
    check_close(vals(y), want);
    // reversed operand order broadcasts the same way
    std::vector<double> want_r;
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 4; ++j) want_r.push_back(ref(bv[j], av[i]));
    check_close(vals(op(b, a)), want_r);
  }
  // scalar forms
  Tensor x = tensor({1, 2, 4}, kFloat64);
  CHECK(vals(x + 1.0) == std::vector<double>{2, 3, 5});
  CHECK(vals(1.0 + x) == std::vector<double>{2, 3, 5});
  CHECK(vals(x - 1.0) == std::vector<double>{0, 1, 3});
  CHECK(vals(10.0 - x) == std::vector<double>{9, 8, 6});
  CHECK(vals(x * 3.0) == std::vector<double>{3, 6, 12});
  CHECK(vals(3.0 * x) == std::vector<double>{3, 6, 12});
  CHECK(vals(x / 2.0) == std::vector<double>{0.5, 1, 2});
  CHECK(vals(8.0 / x) == std::vector<double>{8, 4, 2});
  // integers: exact, and a non-contiguous operand
  Tensor i = arange(6).reshape({2, 3}).t();  // [[0,3],[1,4],[2,5]]
  CHECK((i * i + i).to_vector<int64_t>() == std::vector<int64_t>{0, 12, 2, 20, 6, 30});
  CHECK((i - arange(2)).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 1, 3, 2, 4});
}

TEST_CASE("every unary op matches the C++ standard library", "[forward]") {
  const std::vector<double> xs = {-3.5, -1.0, -0.25, 0.0, 0.3, 1.0, 2.5, 7.0};
  const std::vector<double> pos = {0.01, 0.25, 1.0, 2.0, 9.0, 100.0};
  Tensor x = tensor(xs, kFloat64), p = tensor(pos, kFloat64);
  auto map = [](const std::vector<double>& v, auto f) {
    std::vector<double> r;
    for (double e : v) r.push_back(f(e));
    return r;
  };
  check_close(vals(neg(x)), map(xs, [](double v) { return -v; }));
  check_close(vals(-x), map(xs, [](double v) { return -v; }));
  check_close(vals(exp(x)), map(xs, [](double v) { return std::exp(v); }));
  check_close(vals(log(p)), map(pos, [](double v) { return std::log(v); }));
  check_close(vals(sqrt(p)), map(pos, [](double v) { return std::sqrt(v); }));
  check_close(vals(rsqrt(p)), map(pos, [](double v) { return 1.0 / std::sqrt(v); }));
  check_close(vals(abs(x)), map(xs, [](double v) { return std::fabs(v); }));
  check_close(vals(sigmoid(x)), map(xs, [](double v) { return 1.0 / (1.0 + std::exp(-v)); }));
  check_close(vals(tanh(x)), map(xs, [](double v) { return std::tanh(v); }));
  check_close(vals(relu(x)), map(xs, [](double v) { return v > 0 ? v : 0.0; }));
  check_close(vals(silu(x)), map(xs, [](double v) { return v / (1.0 + std::exp(-v)); }));
  check_close(vals(pow(x, 2)), map(xs, [](double v) { return v * v; }));
  check_close(vals(pow(x, 3)), map(xs, [](double v) { return v * v * v; }));
  check_close(vals(pow(x, 1)), xs);
  check_close(vals(pow(x, 0)), std::vector<double>(xs.size(), 1.0));
  check_close(vals(pow(p, 0.5)), map(pos, [](double v) { return std::sqrt(v); }));
  check_close(vals(pow(p, -1.5)), map(pos, [](double v) { return 1.0 / (v * std::sqrt(v)); }));
  // the method forms
  check_close(vals(x.exp()), vals(exp(x)));
  check_close(vals(x.sigmoid()), vals(sigmoid(x)));
  // special values: log 0 = -inf, sqrt of a negative = NaN, sigmoid saturates without NaN
  CHECK(std::isinf(log(tensor({0.0}, kFloat64)).item()));
  CHECK(std::isnan(sqrt(tensor({-1.0}, kFloat64)).item()));
  check_close(vals(sigmoid(tensor({-800, 800}, kFloat64))), {0.0, 1.0});
  // a strided (transposed) input
  Tensor m = rnd({3, 4}, 5).t();
  check_close(vals(tanh(m)), map(vals(m), [](double v) { return std::tanh(v); }));
  // float32 matches float64 to float precision
  Tensor x32 = x.to(kFloat32);
  check_close(vals(silu(x32)), vals(silu(x)), 1e-6);
  check_close(vals(exp(x32)), vals(exp(x)), 1e-6);
}

TEST_CASE("comparisons, where and masked_fill", "[forward]") {
  Tensor a = tensor({1, 2, 3, 4}, {2, 2}, kFloat64);
  Tensor b = tensor({2, 2}, kFloat64);  // broadcasts over rows
  using V = std::vector<uint8_t>;
  CHECK(eq(a, b).dtype() == kBool);
  CHECK(eq(a, b).to_vector<uint8_t>() == V{0, 1, 0, 0});
  CHECK(ne(a, b).to_vector<uint8_t>() == V{1, 0, 1, 1});
  CHECK(lt(a, b).to_vector<uint8_t>() == V{1, 0, 0, 0});
  CHECK(le(a, b).to_vector<uint8_t>() == V{1, 1, 0, 0});
  CHECK(gt(a, b).to_vector<uint8_t>() == V{0, 0, 1, 1});
  CHECK(ge(a, b).to_vector<uint8_t>() == V{0, 1, 1, 1});
  CHECK(gt(a, 2.5).to_vector<uint8_t>() == V{0, 0, 1, 1});
  CHECK(eq(a, 4).to_vector<uint8_t>() == V{0, 0, 0, 1});
  CHECK(le(arange(4), 1).to_vector<uint8_t>() == V{1, 1, 0, 0});
  // a fractional scalar against an integer tensor is not truncated
  CHECK(lt(arange(4), 1.5).to_vector<uint8_t>() == V{1, 1, 0, 0});
  CHECK(ge(arange(4), 2.5).to_vector<uint8_t>() == V{0, 0, 0, 1});
  CHECK(eq(arange(4), 2.5).to_vector<uint8_t>() == V{0, 0, 0, 0});
  CHECK(gt(arange(4), -0.5).to_vector<uint8_t>() == V{1, 1, 1, 1});
  CHECK(lt(from_vector<int32_t>({-7, 7}, {2}), 1e10).to_vector<uint8_t>() == V{1, 1});
  CHECK(ne(from_vector<int32_t>({-7, 7}, {2}), -7).to_vector<uint8_t>() == V{0, 1});

  Tensor cond = tensor({1, 0}, {2, 1}, kBool);  // row 0 from x, row 1 from y
  Tensor x = tensor({10, 20, 30}, kFloat64), y = tensor({-1.0}, kFloat64);
  Tensor w = where(cond, x, y);
  REQUIRE(w.shape() == Shape{2, 3});
  CHECK(vals(w) == std::vector<double>{10, 20, 30, -1, -1, -1});
  CHECK(vals(where(gt(a, 2), a, zeros({}, kFloat64))) == std::vector<double>{0, 0, 3, 4});

  Tensor mask = tensor({0, 1}, kBool);  // broadcasts over rows: column 1
  CHECK(vals(masked_fill(a, mask, -9)) == std::vector<double>{1, -9, 3, -9});
  CHECK(vals(masked_fill(a.t(), lt(a.t(), 3), 0)) == std::vector<double>{0, 3, 0, 4});
  CHECK(vals(a) == std::vector<double>{1, 2, 3, 4});  // not in place
}

TEST_CASE("sum and mean over dims of a non-contiguous tensor, with and without keepdim", "[forward]") {
  Tensor base = rnd({4, 3, 5}, 7);
  Tensor x = base.permute({2, 0, 1});  // [5, 4, 3], strided
  const auto bv = vals(base);
  auto at = [&](int i, int j, int k) { return bv[j * 15 + k * 5 + i]; };  // x[i][j][k] = base[j][k][i]

  std::vector<double> s1;  // sum over dim 1 → [5, 3]
  for (int i = 0; i < 5; ++i)
    for (int k = 0; k < 3; ++k) {
      double s = 0;
      for (int j = 0; j < 4; ++j) s += at(i, j, k);
      s1.push_back(s);
    }
  CHECK(x.sum({1}).shape() == Shape{5, 3});
  check_close(vals(x.sum({1})), s1);
  CHECK(x.sum({1}, true).shape() == Shape{5, 1, 3});
  check_close(vals(x.sum({1}, true)), s1);
  std::vector<double> m1 = s1;
  for (double& v : m1) v /= 4;
  check_close(vals(x.mean({-2})), m1);

  std::vector<double> s02;  // sum over dims 0 and 2 → [4]
  for (int j = 0; j < 4; ++j) {
    double s = 0;
    for (int i = 0; i < 5; ++i)
      for (int k = 0; k < 3; ++k) s += at(i, j, k);
    s02.push_back(s);
  }
  CHECK(x.sum({0, 2}).shape() == Shape{4});
  check_close(vals(x.sum({2, 0})), s02);
  CHECK(x.mean({0, 2}, true).shape() == Shape{1, 4, 1});
  std::vector<double> m02 = s02;
  for (double& v : m02) v /= 15;
  check_close(vals(x.mean({0, 2}, true)), m02);

  double total = 0;
  for (double v : bv) total += v;
  CHECK(x.sum().dim() == 0);
  CHECK(x.sum().item() == Approx(total));
  CHECK(x.mean().item() == Approx(total / 60));
  // integer sums are exact
  CHECK(arange(10).reshape({2, 5}).t().sum({1}).to_vector<int64_t>() == std::vector<int64_t>{5, 7, 9, 11, 13});
}

TEST_CASE("outer-dim reduction of a large 4096x33 tensor, 1 and 2 threads", "[forward][threads]") {
  Tensor x = rnd({4096, 33}, 11, kFloat32);
  const auto v = vals(x);
  std::vector<double> col(33, 0.0), row(4096, 0.0);
  for (int i = 0; i < 4096; ++i)
    for (int j = 0; j < 33; ++j) col[j] += v[i * 33 + j], row[i] += v[i * 33 + j];
  for (int n : {1, 2}) {
    Threads t(n);
    INFO("threads " << n);
    check_close(vals(x.sum({0})), col, 1e-5);
    check_close(vals(x.sum({1})), row, 1e-5);
    // the transposed view: reducing its dim 1 keeps the unit-stride dim (outer path on strided input)
    Tensor xt = x.t();  // [33, 4096], strides [1, 33]
    check_close(vals(xt.sum({1})), col, 1e-5);
    check_close(vals(xt.sum({0})), row, 1e-5);
    std::vector<double> mean_col = col;
    for (double& c : mean_col) c /= 4096;
    check_close(vals(x.mean({0}, true)), mean_col, 1e-5);
  }
}

TEST_CASE("sum over everything of a 1M-element tensor with 2 threads", "[forward][threads]") {
  Tensor x = rnd({1 << 20}, 13, kFloat32) + 0.25;
  const auto v = vals(x);
  double want = 0;
  for (double e : v) want += e;
  double got1 = 0, got2 = 0;
  {
    Threads t(2);
    REQUIRE(num_threads() == 2);
    got2 = x.sum().item();
    CHECK(x.reshape({1024, 1024}).sum().item() == Approx(want).epsilon(1e-6));
  }
  got1 = x.sum().item();
  CHECK(got2 == Approx(want).epsilon(1e-6));
  CHECK(got1 == Approx(want).epsilon(1e-6));
  Tensor xd = x.to(kFloat64);
  Threads t(2);
  CHECK(xd.sum().item() == Approx(want).epsilon(1e-12));
  CHECK(xd.max().item() == *std::max_element(v.begin(), v.end()));
}

TEST_CASE("threaded kernels on large strided tensors agree with the serial values", "[forward][threads]") {
  Tensor a = rnd({300, 500}, 51), b = rnd({500}, 52);
  const auto av = vals(a), bv = vals(b);
  Tensor at = a.t();  // [500, 300], strided
  std::vector<double> want_add(150000), want_rows(2, 0.0), want_max(500, -INFINITY);
  for (int i = 0; i < 500; ++i)
    for (int j = 0; j < 300; ++j) {
      const double v = av[j * 500 + i];
      want_add[i * 300 + j] = std::tanh(v) * bv[i];
      want_max[i] = std::max(want_max[i], v);
    }
  for (int j = 0; j < 300; ++j)
    for (int i = 0; i < 500; ++i) want_rows[j % 2] += av[j * 500 + i];
  for (int n : {2, 3}) {
    Threads t(n);
    INFO("threads " << n);
    check_close(vals(tanh(at) * b.unsqueeze(1)), want_add);
    check_close(vals(at.max(1)), want_max);
    // 2 outputs, long blocks: fewer outputs than threads splits each block
    Tensor rows2 = a.view({150, 2, 500}).sum({0, 2});
    check_close(vals(rows2), want_rows, 1e-10);
    check_close(vals(softmax(at, 0).sum({0})), std::vector<double>(300, 1.0), 1e-12);
  }
}

TEST_CASE("max, min and argmax, with ties going to the first occurrence", "[forward]") {
  Tensor x = tensor({3, 7, 7, 1, 5, 7, 9, 9, 5, 2, 9, 2}, {3, 4}, kFloat64);
  CHECK(x.max().item() == 9.0);
  CHECK(vals(x.max(1)) == std::vector<double>{7, 9, 9});
  CHECK(x.max(1, true).shape() == Shape{3, 1});
  CHECK(vals(x.max(0)) == std::vector<double>{5, 7, 9, 9});
  CHECK(vals(min(x, 1)) == std::vector<double>{1, 5, 2});
  CHECK(min(x, 0, true).shape() == Shape{1, 4});
  CHECK(vals(min(x, 0, true)) == std::vector<double>{3, 2, 7, 1});
  CHECK(argmax(x, 1).dtype() == kInt64);
  CHECK(argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 2});
  CHECK(argmax(x, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 1});
  CHECK(argmax(x, -1, true).shape() == Shape{3, 1});
  // on a transposed view: x.t() dim 0 is x's dim 1
  CHECK(argmax(x.t(), 0).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 2});
  CHECK(vals(x.t().max(1)) == std::vector<double>{5, 7, 9, 9});
  // negative values only (the identity must not leak in) and integers
  CHECK(tensor({-5, -2, -8}, kFloat32).max().item() == -2.0);
  CHECK(arange(5).max().item<int64_t>() == 4);
  Tensor xi = tensor({3, -1, 2, -1, 8, 8}, {2, 3}, kInt64);
  CHECK(min(xi, 1).dtype() == kInt64);
  CHECK(min(xi, 1).to_vector<int64_t>() == std::vector<int64_t>{-1, -1});
  CHECK(min(xi, 0, true).to_vector<int64_t>() == std::vector<int64_t>{-1, -1, 2});
  CHECK(min(xi.t(), 1).to_vector<int64_t>() == std::vector<int64_t>{-1, -1, 2});
  CHECK(max(xi, 0).to_vector<int64_t>() == std::vector<int64_t>{3, 8, 8});
}

TEST_CASE("logsumexp is stable and exact", "[forward]") {
  Tensor x = tensor({1, 2, 3, -1, 0, 1000}, {2, 3}, kFloat64);
  Tensor y = logsumexp(x, 1);
  REQUIRE(y.shape() == Shape{2});
  CHECK(vals(y)[0] == Approx(std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0))));
  CHECK(vals(y)[1] == Approx(1000.0 + std::log1p(std::exp(-1001.0) + std::exp(-1000.0))));
  CHECK(logsumexp(x, 0, true).shape() == Shape{1, 3});
  CHECK(vals(logsumexp(x, 0))[0] == Approx(std::log(std::exp(1.0) + std::exp(-1.0))));
  Tensor ninf = full({3}, -INFINITY, kFloat64);
  CHECK(std::isinf(logsumexp(ninf, 0).item()));
  CHECK(logsumexp(ninf, 0).item() < 0);
}

TEST_CASE("softmax and log_softmax, including inputs of ±1e4", "[forward]") {
  Tensor x = rnd({3, 5}, 17);
  const auto v = vals(x);
  for (int dim : {0, 1}) {
    INFO("dim " << dim);
    std::vector<double> sm(15), lsm(15);
    const int outer = dim == 1 ? 3 : 5, len = dim == 1 ? 5 : 3;
    for (int o = 0; o < outer; ++o) {
      auto idx = [&](int j) { return dim == 1 ? o * 5 + j : j * 5 + o; };
      double m = -INFINITY, s = 0;
      for (int j = 0; j < len; ++j) m = std::max(m, v[idx(j)]);
      for (int j = 0; j < len; ++j) s += std::exp(v[idx(j)] - m);
      for (int j = 0; j < len; ++j) {
        sm[idx(j)] = std::exp(v[idx(j)] - m) / s;
        lsm[idx(j)] = v[idx(j)] - m - std::log(s);
      }
    }
    check_close(vals(softmax(x, dim)), sm);
    check_close(vals(log_softmax(x, dim)), lsm);
    check_close(vals(x.to(kFloat32).softmax(dim)), sm, 1e-6);
  }
  // non-contiguous input along the last dim
  check_close(vals(softmax(x.t(), -1)), vals(softmax(x, 0).t()));

  Tensor big = tensor({1e4, -1e4, 0, 1e4, 1e4, 1e4}, {2, 3}, kFloat32);
  const auto s = vals(softmax(big, 1)), ls = vals(log_softmax(big, 1));
  for (double e : s) CHECK(std::isfinite(e));
  CHECK(s[0] == Approx(1.0));
  CHECK(s[1] == 0.0);
  CHECK(s[2] == 0.0);
  CHECK(s[3] == Approx(1.0 / 3));
  CHECK(ls[0] == Approx(0.0).margin(1e-6));
  CHECK(ls[1] == Approx(-2e4));
  CHECK(ls[2] == Approx(-1e4));
  CHECK(ls[4] == Approx(-std::log(3.0)).margin(2e-3));  // float32 ulp at 1e4 is ~1e-3
}

TEST_CASE("matmul in every supported form matches a naive triple loop", "[forward][matmul]") {
  for (DType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
    INFO("dtype " << dtype_name(dt));
    Tensor A = rnd({3, 4}, 21, dt), B = rnd({4, 5}, 22, dt);
    const auto av = vals(A), bv = vals(B);
    check_close(vals(matmul(A, B)), naive_mm(av, 4, 1, bv, 5, 1, 3, 4, 5), tol);
    CHECK(matmul(A, B).shape() == Shape{3, 5});
    // transposed operands (views, no copies)
    Tensor At = rnd({4, 3}, 23, dt), Bt = rnd({5, 4}, 24, dt);
    check_close(vals(matmul(At.t(), Bt.t())), naive_mm(vals(At), 1, 3, vals(Bt), 1, 4, 3, 4, 5), tol);
    check_close(vals(matmul(At.t(), B)), naive_mm(vals(At), 1, 3, bv, 5, 1, 3, 4, 5), tol);
    // a strided slice (step 2) as an operand
    Tensor Bw = rnd({4, 10}, 25, dt);
    check_close(vals(matmul(A, Bw.slice(1, 0, 10, 2))), naive_mm(av, 4, 1, vals(Bw), 10, 2, 3, 4, 5), tol);
    // 1-D · 1-D → 0-d
    Tensor u = rnd({4}, 26, dt), w = rnd({4}, 27, dt);
    Tensor d = matmul(u, w);
    CHECK(d.dim() == 0);
    double dot = 0;
    for (int k = 0; k < 4; ++k) dot += vals(u)[k] * vals(w)[k];
    CHECK(d.item() == Approx(dot).epsilon(tol));
    // 1-D @ 2-D and 2-D @ 1-D
    CHECK(matmul(u, B).shape() == Shape{5});
    check_close(vals(matmul(u, B)), naive_mm(vals(u), 4, 1, bv, 5, 1, 1, 4, 5), tol);
    CHECK(matmul(A, u).shape() == Shape{3});
    check_close(vals(matmul(A, u)), naive_mm(av, 4, 1, vals(u), 1, 1, 3, 4, 1), tol);
    // batched with broadcast batch dims: [2, 1, 3, 4] @ [5, 4, 2] → [2, 5, 3, 2]
    Tensor P = rnd({2, 1, 3, 4}, 28, dt), Q = rnd({5, 4, 2}, 29, dt);
    Tensor R = matmul(P, Q);
    REQUIRE(R.shape() == Shape{2, 5, 3, 2});
    const auto pv = vals(P), qv = vals(Q);
    std::vector<double> want;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 5; ++j) {
        auto c = naive_mm(pv, 4, 1, qv, 2, 1, 3, 4, 2, i * 12, j * 8);
        want.insert(want.end(), c.begin(), c.end());
      }
    check_close(vals(R), want, tol);
    // [..., M, K] @ [K, N] (batch folded into M) and batched transposed operands
    Tensor S = rnd({2, 3, 4}, 30, dt);
    std::vector<double> want_s;
    for (int i = 0; i < 2; ++i) {
      auto c = naive_mm(vals(S), 4, 1, bv, 5, 1, 3, 4, 5, i * 12);
      want_s.insert(want_s.end(), c.begin(), c.end());
    }
    check_close(vals(matmul(S, B)), want_s, tol);
    Tensor St = rnd({2, 4, 3}, 31, dt);  // St.transpose(-2, -1): [2, 3, 4] column-major per matrix
    std::vector<double> want_t;
    for (int i = 0; i < 2; ++i) {
      auto c = naive_mm(vals(St), 1, 3, vals(S), 1, 4, 3, 4, 3, i * 12, i * 12);  // St[i]ᵀ @ S[i]ᵀ
      want_t.insert(want_t.end(), c.begin(), c.end());
    }
    check_close(vals(matmul(St.transpose(-2, -1), S.transpose(-2, -1))), want_t, tol);
  }
  // float32 agrees with float64
  Tensor A = rnd({16, 32}, 40), B = rnd({32, 8}, 41);
  check_close(vals(matmul(A.to(kFloat32), B.to(kFloat32))), vals(matmul(A, B)), 1e-5);
}

TEST_CASE("matmul of a single row (the matrix-vector path) matches a naive loop", "[forward][matmul]") {
  // M = 1 runs as gemv: our own loop for small weights stored [N, K] (Linear's Wᵀ view), BLAS gemv
  // for large ones and for a row-major b; strided rows and batches of single rows too.
  for (DType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat64 ? 1e-12 : 2e-5;
    INFO("dtype " << dtype_name(dt));
    struct Size {
      int64_t K, N;
    };
    // small (N·K ≤ 32768, a multiple of 4 rows and not), large (BLAS), K = 1, N = 1
    for (const Size sz : {Size{64, 172}, Size{7, 5}, Size{512, 96}, Size{1, 9}, Size{33, 1}}) {
      INFO("K " << sz.K << " N " << sz.N);
      const int64_t K = sz.K, N = sz.N;
      Tensor x = rnd({1, K}, 50, dt), W = rnd({N, K}, 51, dt), B = rnd({K, N}, 52, dt);
      const auto xv = vals(x), wv = vals(W), bv = vals(B);
      check_close(vals(matmul(x, W.t())), naive_mm(xv, K, 1, wv, 1, K, 1, K, N), tol);  // Wᵀ, column-major
      check_close(vals(matmul(x, B)), naive_mm(xv, K, 1, bv, N, 1, 1, K, N), tol);      // row-major
      // a row with stride: row 2 of a [K, 3] matrix's transpose
      Tensor Xt = rnd({K, 3}, 53, dt);
      check_close(vals(matmul(Xt.t().narrow(0, 2, 1), W.t())), naive_mm(vals(Xt), 1, 3, wv, 1, K, 1, K, N, 2), tol);
      // a batch of single rows [2, 1, K] @ [2, K, N] (b as transposed views)
      Tensor xb = rnd({2, 1, K}, 54, dt), Wb = rnd({2, N, K}, 55, dt);
      std::vector<double> want;
      for (int i = 0; i < 2; ++i) {
        auto c = naive_mm(vals(xb), K, 1, vals(Wb), 1, K, 1, K, N, i * K, i * N * K);
        want.insert(want.end(), c.begin(), c.end());
      }
      check_close(vals(matmul(xb, Wb.transpose(-2, -1))), want, tol);
    }
  }
  // the gradient through a single row equals the one through the same row inside a 2-row batch
  Tensor W = rnd({6, 10}, 60).requires_grad_(true), x = rnd({1, 10}, 61).requires_grad_(true);
  matmul(x, W.t()).sum().backward();
  Tensor W2 = W.detach().clone().requires_grad_(true), x2 = cat({x.detach(), zeros({1, 10}, kFloat64)}, 0);
  x2.requires_grad_(true);
  matmul(x2, W2.t()).sum().backward();
  check_close(vals(W.grad()), vals(W2.grad()));
  check_close(vals(x.grad()), vals(x2.grad().narrow(0, 0, 1)));
}

TEST_CASE("cat and stack", "[forward]") {
  Tensor a = tensor({1, 2, 3, 4}, {2, 2}, kFloat64), b = tensor({5, 6}, {1, 2}, kFloat64);
  Tensor c0 = cat({a, b}, 0);
  REQUIRE(c0.shape() == Shape{3, 2});
  CHECK(vals(c0) == std::vector<double>{1, 2, 3, 4, 5, 6});
  Tensor c1 = cat({a, b.t().expand({2, 3})}, -1);  // [2, 2] ++ [2, 3]
  REQUIRE(c1.shape() == Shape{2, 5});
  CHECK(vals(c1) == std::vector<double>{1, 2, 5, 5, 5, 3, 4, 6, 6, 6});
  CHECK(vals(cat({a.t(), a}, 1)) == std::vector<double>{1, 3, 1, 2, 2, 4, 3, 4});
  Tensor s0 = stack({a, a * 10.0}, 0);
  REQUIRE(s0.shape() == Shape{2, 2, 2});
  CHECK(vals(s0) == std::vector<double>{1, 2, 3, 4, 10, 20, 30, 40});
  Tensor s2 = stack({a, a * 10.0}, 2);
  REQUIRE(s2.shape() == Shape{2, 2, 2});
  CHECK(vals(s2) == std::vector<double>{1, 10, 2, 20, 3, 30, 4, 40});
  CHECK(stack({scalar_tensor(1), scalar_tensor(2)}, 0).shape() == Shape{2});
  CHECK(cat({arange(2), arange(3)}, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0, 1, 2});
}

TEST_CASE("index_select, embedding (repeated ids) and gather", "[forward]") {
  Tensor x = arange(0, 12, 1, kFloat64).reshape({3, 4});
  Tensor rows = index_select(x, 0, tensor({2, 0, 2}, kInt64));
  REQUIRE(rows.shape() == Shape{3, 4});
  CHECK(vals(rows) == std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  Tensor cols = index_select(x, 1, from_vector<int32_t>({3, 3, 1}, {3}));
  REQUIRE(cols.shape() == Shape{3, 3});
  CHECK(vals(cols) == std::vector<double>{3, 3, 1, 7, 7, 5, 11, 11, 9});
  CHECK(vals(index_select(x.t(), 0, tensor({1}, kInt64))) == std::vector<double>{1, 5, 9});

  Tensor weight = arange(0, 10, 1, kFloat64).reshape({5, 2});
  Tensor ids = tensor({4, 1, 4, 0, 0, 4}, {2, 3}, kInt64);
  Tensor e = embedding(weight, ids);
  REQUIRE(e.shape() == Shape{2, 3, 2});
  CHECK(vals(e) == std::vector<double>{8, 9, 2, 3, 8, 9, 0, 1, 0, 1, 8, 9});

  // gather along dim 1: out[i][j] = x[i][idx[i][j]]; along dim 0: out[i][j] = x[idx[i][j]][j]
  Tensor idx = tensor({3, 0, 0, 1, 2, 2}, {3, 2}, kInt64);
  CHECK(vals(gather(x, 1, idx)) == std::vector<double>{3, 0, 4, 5, 10, 10});
  Tensor idx0 = tensor({2, 0, 1, 1, 0, 2}, {2, 3}, kInt64);
  CHECK(vals(gather(x, 0, idx0)) == std::vector<double>{8, 1, 6, 4, 1, 10});
  // 3-D, middle dim
  Tensor y = arange(0, 24, 1, kFloat64).reshape({2, 3, 4});
  Tensor gi = tensor({2, 0, 1, 1}, {2, 1, 2}, kInt64);
  std::vector<double> want;  // out[i][0][k] = y[i][gi[i][0][k]][k]
  const std::vector<int> g = {2, 0, 1, 1};
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 2; ++k) want.push_back(i * 12 + g[i * 2 + k] * 4 + k);
  CHECK(vals(gather(y, 1, gi)) == want);
}

TEST_CASE("max, min, argmax and softmax of rows that are all ±inf, on every compiler", "[forward]") {
  // OpenMP's simd max/min reductions start their lanes at −inf/+inf under GCC but at ∓max() under
  // clang; kernels/cpu/simd_extremum.h corrects that. Rows long enough for the vector loops (and for
  // several 1024-blocks in argmax), float32 and float64.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  for (DType dt : {kFloat32, kFloat64})
    for (int64_t n : {1, 3, 17, 1000, 5000}) {
      INFO(dtype_name(dt) << " n " << n);
      const Tensor ninf = full({2, n}, -kInf, dt), pinf = full({2, n}, kInf, dt);
      CHECK(vals(max(ninf, 1)) == std::vector<double>{-kInf, -kInf});
      CHECK(vals(max(ninf))[0] == -kInf);
      CHECK(vals(min(pinf, 1)) == std::vector<double>{kInf, kInf});
      CHECK(argmax(ninf, 1).to_vector<int64_t>() == std::vector<int64_t>{0, 0});
      CHECK(std::isinf(vals(logsumexp(ninf, 1))[0]));
      // The lowest finite value among −inf: it is the maximum, found where it is.
      Tensor mixed = full({1, n}, -kInf, dt);
      const double lowest = dt == kFloat32 ? double(std::numeric_limits<float>::lowest())
                                           : std::numeric_limits<double>::lowest();
      mixed.narrow(1, n - 1, 1).fill_(lowest);
      CHECK(vals(max(mixed, 1))[0] == lowest);
      CHECK(argmax(mixed, 1).to_vector<int64_t>()[0] == n - 1);
      // softmax: the one finite entry takes all the mass.
      Tensor one = full({1, n}, -kInf, dt);
      one.narrow(1, n / 2, 1).fill_(0.5);
      const auto p = vals(softmax(one, 1));
      for (int64_t j = 0; j < n; ++j) CHECK(p[size_t(j)] == (j == n / 2 ? 1.0 : 0.0));
    }
}

TEST_CASE("max, min and argmax over an empty dim are refused, other reductions give the identity", "[forward]") {
  const Tensor e = zeros({0, 3});
  CHECK_THROWS_WITH(max(e, 0), Catch::Contains("max: cannot reduce dim 0 of size 0 (shape [0, 3])"));
  CHECK_THROWS_AS(min(e, 0), Error);
  CHECK_THROWS_AS(argmax(e, 0), Error);
  CHECK_THROWS_AS(max(e), Error);
  CHECK(max(e, 1).shape() == Shape{0});  // reducing a non-empty dim of an empty tensor is fine
  CHECK(vals(sum(e, {0})) == std::vector<double>{0, 0, 0});
}

// test_max_paths.cpp — max/argmax along a contiguous dim takes a blocked SIMD path, split across
// threads when rows are few and long. Checked against a naive first-maximum scan: ties (the first
// wins, also across blocks and thread chunks), NaN (the first NaN wins), odd lengths.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "tests/thread_count.h"

using namespace tapegrad;

namespace {

using ThreadsGuard = testing::ThreadCount;

// first index of the maximum of each row of a [rows, len] row-major array; NaN beats all
std::pair<std::vector<double>, std::vector<int64_t>> naive(const std::vector<double>& v, int64_t rows, int64_t len) {
  std::vector<double> m(rows);
  std::vector<int64_t> idx(rows);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t best = 0;
    for (int64_t j = 1; j < len; ++j) {
      const double a = v[r * len + best], b = v[r * len + j];
      if (std::isnan(a)) break;
      if (std::isnan(b) || b > a) best = j;
    }
    m[r] = v[r * len + best];
    idx[r] = best;
  }
  return {m, idx};
}

void check_rows(DType dtype, int64_t rows, int64_t len, const std::vector<std::pair<int64_t, double>>& plant) {
  Generator gen(rows * 1000 + len);
  std::vector<double> v(rows * len);
  for (double& x : v) x = std::round(gen.normal() * 100) / 100;  // coarse values: many natural ties
  for (auto [at, value] : plant) v[at] = value;
  Tensor x = tensor(v, {rows, len}, dtype);
  auto [m, idx] = naive(tensor(v, {rows, len}, dtype).to_vector<double>(), rows, len);
  const std::vector<double> got = max(x, 1).to_vector<double>();
  const std::vector<int64_t> arg = argmax(x, 1).to_vector<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    INFO("row " << r << " of [" << rows << ", " << len << "] " << dtype_name(dtype));
    if (std::isnan(m[r])) CHECK(std::isnan(got[r]));
    else CHECK(got[r] == m[r]);
    CHECK(arg[r] == idx[r]);
  }
}

}  // namespace

TEST_CASE("max and argmax over few long rows split across threads", "[reduce][max]") {
  ThreadsGuard two(2);
  const int64_t len = 300001;  // not a multiple of the 1024-element block
  // a tie between a position in the first half and one in the second half: the first wins
  check_rows(kFloat32, 1, len, {{1000, 500.0}, {250000, 500.0}});
  // the tie inside one block
  check_rows(kFloat64, 1, len, {{200003, 7e3}, {200001, 7e3}});
  // the maximum in the last, partial block
  check_rows(kFloat32, 1, len, {{len - 1, 1e6}});
  // ±inf without NaN: the NaN probe fires (inf·0 is NaN) and the scan must fall through
  const double inf = std::numeric_limits<double>::infinity();
  check_rows(kFloat32, 1, len, {{77, -inf}, {150000, inf}, {299999, inf}});
  check_rows(kFloat64, 1, len, {{5, -inf}});
  // NaN in the second thread's chunk beats a larger finite value in the first
  check_rows(kFloat32, 1, len, {{10, 1e9}, {200000, std::nan("")}, {250000, std::nan("")}});
}

TEST_CASE("max and argmax over many rows take the blocked path per row", "[reduce][max]") {
  ThreadsGuard two(2);
  check_rows(kFloat32, 37, 1000, {{5 * 1000 + 999, 1e3}, {7 * 1000 + 3, std::nan("")}, {9 * 1000 + 64, 1e3},
                                  {9 * 1000 + 640, 1e3}});
  check_rows(kFloat64, 5, 63, {{2 * 63 + 1, -std::numeric_limits<double>::infinity()}, {3 * 63, 1e300}});
  check_rows(kFloat32, 3, 1, {});
}

TEST_CASE("the gradient of max over all elements goes to the first maximum", "[reduce][max]") {
  ThreadsGuard two(2);
  const int64_t n = 100000;
  std::vector<double> v(n, 0.0);
  v[123] = 5.0, v[99999] = 5.0;
  Tensor x = tensor(v, Options(kFloat32).requires_grad());
  Tensor m = max(x);
  m.backward();
  CHECK(m.item() == 5.0);
  const std::vector<float> g = x.grad().to_vector<float>();
  double total = 0;
  for (float gi : g) total += gi;
  CHECK(g[123] == 1.0f);
  CHECK(total == 1.0);
}

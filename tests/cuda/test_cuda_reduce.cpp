// test_cuda_reduce.cpp — CudaBackend reduce (sum / max / min) and max_along against the CPU backend:
// every subset of the dims of a 3-D tensor (none, one, two, all), float32 / float64 / int32 / int64,
// contiguous / permuted / sliced inputs and a strided output, long reductions that take the
// sliced-row path (a full sum of 10⁵ elements, a column sum of [20000, 3]), NaN propagation, an
// empty reduction (the identity), int32 sums that wrap; max_along on every dim with ties (the first
// maximum wins) and NaN (the first NaN wins), long rows; bool is refused.
#include <algorithm>
#include <limits>

#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
using kernels::ReduceOp;

namespace {

const DType kNumericTypes[] = {kFloat32, kFloat64, kInt32, kInt64};
const ReduceOp kOps[] = {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min};
const char* op_name(ReduceOp op) { return op == ReduceOp::Sum ? "sum" : op == ReduceOp::Max ? "max" : "min"; }

void expect_same(const Tensor& want, const Tensor& got, const std::string& what) {
  const DType t = want.dtype();
  const bool fp = t == kFloat32 || t == kFloat64;
  expect_close(want, got, fp ? rtol_for(t) : 0.0, fp ? atol_for(t) : 0.0, what);
}

// Random values of t: N(0, 1) for floats, integers in [−1000, 1000) otherwise.
Tensor random_of(DType t, const Shape& shape) {
  if (t == kFloat32 || t == kFloat64) return randn(shape, Options(t));
  return randint(-1000, 1000, shape, Options(t));
}

// Runs reduce on both backends: in (CPU) and in_gpu (the same view on the GPU) reduced to the
// keepdim shape of `reduced` dims; compares the results.
void check_reduce(ReduceOp op, const Tensor& in, const Tensor& in_gpu, const std::vector<int>& reduced,
                  const std::string& what) {
  Shape out_shape = in.shape();
  for (int d : reduced) out_shape[d] = 1;
  Tensor want = empty(out_shape, Options(in.dtype())), got = empty(out_shape, Options(in.dtype()).device(gpu()));
  cpu_be().reduce(op, view(want), view(in));
  gpu_be().reduce(op, view(got), view(in_gpu));
  const DType t = in.dtype();
  if (op == ReduceOp::Sum && (t == kFloat32 || t == kFloat64)) {
    // Two summation orders of n N(0, 1) values differ by rounding that grows with n, not with the
    // (possibly cancelled, near-zero) sum itself: the absolute tolerance scales with n.
    const double n = double(std::max<int64_t>(1, in.numel() / std::max<int64_t>(1, want.numel())));
    expect_close(want, got, rtol_for(t), atol_for(t) * n, what);
    return;
  }
  expect_same(want, got, what);
}

std::string dims_str(const std::vector<int>& dims) { return fmt::format("{{{}}}", fmt::join(dims, ",")); }

}  // namespace

TEST_CASE("reduce: sum / max / min over every set of dims of a 3-D tensor, every dtype", "[cuda][reduce]") {
  manual_seed(11);  // the same values whatever ran before
  const std::vector<std::vector<int>> dim_sets = {{}, {0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}};
  for (ReduceOp op : kOps)
    for (DType t : kNumericTypes)
      for (const auto& dims : dim_sets) {
        // [7, 45, 9]: contiguous, then the same values as a permuted view of a [9, 7, 45] base, then a
        // sliced view (every other element of the last dim of a wider base)
        const Tensor x = random_of(t, {7, 45, 9});
        check_reduce(op, x, on_cuda(x), dims, fmt::format("{} {} dims {} contiguous", op_name(op), t, dims_str(dims)));
        const Tensor p = random_of(t, {9, 7, 45});
        check_reduce(op, p.permute({1, 2, 0}), on_cuda(p).permute({1, 2, 0}), dims,
                     fmt::format("{} {} dims {} permuted", op_name(op), t, dims_str(dims)));
        const Tensor w = random_of(t, {8, 45, 19});
        check_reduce(op, w.slice(0, 1, 8).slice(2, 0, 18, 2), on_cuda(w).slice(0, 1, 8).slice(2, 0, 18, 2), dims,
                     fmt::format("{} {} dims {} sliced", op_name(op), t, dims_str(dims)));
      }
}

TEST_CASE("reduce: long reductions take the sliced-row path (full sum of 1e5, column sums)", "[cuda][reduce]") {
  manual_seed(12);
  for (ReduceOp op : kOps)
    for (DType t : kNumericTypes) {
      const Tensor flat = random_of(t, {100003});
      check_reduce(op, flat, on_cuda(flat), {0}, fmt::format("{} {} of 100003 elements", op_name(op), t));
      // outer reduction: the kept dim is the fastest-moving one
      const Tensor cols = random_of(t, {20000, 3});
      check_reduce(op, cols, on_cuda(cols), {0}, fmt::format("{} {} over dim 0 of [20000, 3]", op_name(op), t));
      // both dims of a transposed [300, 257]: 77100 elements, rows read across the stride
      const Tensor tr = random_of(t, {300, 257});
      check_reduce(op, tr.t(), on_cuda(tr).t(), {0, 1}, fmt::format("{} {} of a transposed [257, 300]", op_name(op), t));
    }
  // float32 sums accumulate in double, as on the CPU: 1e5 ones plus 1e-3 each is exact to 1e-5
  const Tensor ones_plus = full({100000}, 1.001, Options(kFloat32));
  Tensor got = empty({1}, Options(kFloat32).device(gpu()));
  gpu_be().reduce(ReduceOp::Sum, view(got), view(on_cuda(ones_plus)));
  CHECK(values(got)[0] == Approx(100100.0).epsilon(1e-6));
}

TEST_CASE("reduce: NaN propagates through max/min/sum, an empty reduction is the identity", "[cuda][reduce]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType t : {kFloat32, kFloat64}) {
    Tensor x = randn({5, 3000}, Options(t));
    x.slice(0, 1, 2).slice(1, 2999, 3000).fill_(nan);  // row 1: last element
    x.slice(0, 3, 4).slice(1, 0, 1).fill_(nan);        // row 3: first element
    x.slice(0, 4, 5).slice(1, 17, 18).fill_(inf);      // row 4: +inf (max), not NaN
    for (ReduceOp op : kOps) {
      check_reduce(op, x, on_cuda(x), {1}, fmt::format("{} {} rows with NaN", op_name(op), t));
      check_reduce(op, x.t(), on_cuda(x).t(), {0}, fmt::format("{} {} columns with NaN", op_name(op), t));
      check_reduce(op, x, on_cuda(x), {0, 1}, fmt::format("{} {} all with NaN", op_name(op), t));
    }
    // a long row whose NaN sits in a late slice
    Tensor big = randn({60000}, Options(t));
    big.slice(0, 51234, 51235).fill_(nan);
    for (ReduceOp op : kOps) check_reduce(op, big, on_cuda(big), {0}, fmt::format("{} {} long row with NaN", op_name(op), t));
  }
  for (DType t : kNumericTypes)
    for (ReduceOp op : kOps) {
      const Tensor e = zeros({0, 5}, Options(t));
      check_reduce(op, e, on_cuda(e), {0}, fmt::format("{} {} over an empty dim", op_name(op), t));
      Tensor none = empty({0, 1}, Options(t).device(gpu()));
      gpu_be().reduce(op, view(none), view(on_cuda(e)));  // nothing to write
      CHECK(values(none).empty());
    }
}

TEST_CASE("reduce: int32 sums accumulate in int64 and wrap like the CPU, strided output, bool refused", "[cuda][reduce]") {
  const Tensor big = full({4, 9}, 1.0e9, Options(kInt32));
  check_reduce(ReduceOp::Sum, big, on_cuda(big), {1}, "int32 sum that overflows");

  // out: the transpose of a [9, 6] buffer, i.e. strides (1, 6) for the keepdim shape [6, 1, 9]
  for (DType t : {kFloat32, kInt64}) {
    const Tensor x = random_of(t, {6, 40, 9});
    const Tensor init = random_of(t, {9, 6});
    Tensor want_base = init.clone(), got_base = on_cuda(init);
    const Shape keep = {6, 1, 9};
    cpu_be().reduce(ReduceOp::Sum, view(want_base.t().unsqueeze(1)), view(x));
    gpu_be().reduce(ReduceOp::Sum, view(got_base.t().unsqueeze(1)), view(on_cuda(x)));
    REQUIRE(want_base.t().unsqueeze(1).shape() == keep);
    expect_same(want_base, got_base, fmt::format("sum into a transposed output {}", t));
  }

  const Tensor b = on_cuda(ones({4}, Options(kBool)));
  Tensor o = empty({1}, Options(kBool).device(gpu()));
  CHECK_THROWS_WITH(gpu_be().reduce(ReduceOp::Sum, view(o), view(b)), Catch::Contains("bool"));
  Tensor vi = empty({1}, Options(kBool).device(gpu())), ii = empty({1}, Options(kInt64).device(gpu()));
  CHECK_THROWS_WITH(gpu_be().max_along(view(vi), view(ii), view(b), 0), Catch::Contains("bool"));
}

namespace {

void check_max_along(const Tensor& in, const Tensor& in_gpu, int dim, const std::string& what) {
  Shape out_shape = in.shape();
  out_shape[dim] = 1;
  Tensor wv = empty(out_shape, Options(in.dtype())), wi = empty(out_shape, Options(kInt64));
  Tensor gv = empty(out_shape, Options(in.dtype()).device(gpu())), gi = empty(out_shape, Options(kInt64).device(gpu()));
  cpu_be().max_along(view(wv), view(wi), view(in), dim);
  gpu_be().max_along(view(gv), view(gi), view(in_gpu), dim);
  expect_same(wv, gv, what + " values");
  expect_same(wi, gi, what + " indices");
}

// Small integers (many ties: the first maximum must win), as t.
Tensor tied_values(DType t, const Shape& shape) { return randint(-3, 4, shape, Options(kInt64)).to(t); }

}  // namespace

TEST_CASE("reduce: max_along every dim with ties, every dtype, strided inputs", "[cuda][reduce]") {
  for (DType t : kNumericTypes)
    for (int dim = 0; dim < 3; ++dim) {
      const Tensor x = tied_values(t, {6, 50, 7});
      check_max_along(x, on_cuda(x), dim, fmt::format("max_along {} dim {} contiguous", t, dim));
      const Tensor p = tied_values(t, {7, 6, 50});
      check_max_along(p.permute({1, 2, 0}), on_cuda(p).permute({1, 2, 0}), dim,
                      fmt::format("max_along {} dim {} permuted", t, dim));
      const Tensor r = random_of(t, {6, 50, 7});
      check_max_along(r, on_cuda(r), dim, fmt::format("max_along {} dim {} random", t, dim));
    }
}

TEST_CASE("reduce: max_along NaN beats all (the first NaN), long rows, size-1 dim", "[cuda][reduce]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (DType t : {kFloat32, kFloat64}) {
    Tensor x = tied_values(t, {4, 300});
    x.slice(0, 0, 1).slice(1, 200, 201).fill_(nan);
    x.slice(0, 0, 1).slice(1, 250, 251).fill_(nan);  // row 0: NaN at 200 and 250 → 200
    x.slice(0, 2, 3).slice(1, 0, 1).fill_(nan);      // row 2: NaN first
    x.slice(0, 3, 4).fill_(-std::numeric_limits<double>::infinity());  // row 3: all −inf → index 0
    check_max_along(x, on_cuda(x), 1, fmt::format("max_along {} rows with NaN", t));
    check_max_along(x.t(), on_cuda(x).t(), 0, fmt::format("max_along {} transposed rows with NaN", t));

    // long rows (sliced path): ties everywhere, the maximum 10 placed twice, NaN in another row
    Tensor big = tied_values(t, {3, 40000});
    big.slice(0, 1, 2).slice(1, 30001, 30002).fill_(10.0);
    big.slice(0, 1, 2).slice(1, 35000, 35001).fill_(10.0);
    big.slice(0, 2, 3).slice(1, 39999, 40000).fill_(nan);
    check_max_along(big, on_cuda(big), 1, fmt::format("max_along {} long rows", t));
    check_max_along(big.t(), on_cuda(big).t(), 0, fmt::format("max_along {} long transposed rows", t));
  }
  const Tensor one = randn({5, 1, 3});
  check_max_along(one, on_cuda(one), 1, "max_along over a size-1 dim");
}

TEST_CASE("reduce: max_along over an empty dim is refused by both backends", "[cuda][reduce]") {
  // [2, 0, 3] along dim 1: no maximum exists (and the CPU loop would read past the tensor).
  const Tensor in = empty({2, 0, 3}, Options(kFloat32));
  const Tensor in_gpu = empty({2, 0, 3}, Options(kFloat32).device(gpu()));
  Tensor wv = empty({2, 1, 3}, Options(kFloat32)), wi = empty({2, 1, 3}, Options(kInt64));
  Tensor gv = empty({2, 1, 3}, Options(kFloat32).device(gpu())), gi = empty({2, 1, 3}, Options(kInt64).device(gpu()));
  CHECK_THROWS_WITH(cpu_be().max_along(view(wv), view(wi), view(in), 1), Catch::Contains("dim 1 of shape [2, 0, 3]"));
  CHECK_THROWS_WITH(gpu_be().max_along(view(gv), view(gi), view(in_gpu), 1), Catch::Contains("dim 1 of shape [2, 0, 3]"));
}

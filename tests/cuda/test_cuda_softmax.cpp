// test_cuda_softmax.cpp — CudaBackend softmax / log_softmax and their backward against the CPU
// backend: dims 0 / middle / last of a 3-D tensor, float32 and float64, contiguous, permuted and sliced
// inputs, strided outputs, short and long rows (a block per row, several rows per block, strided rows
// with many lanes), rows with NaN / +inf / all −inf / ±1e4 values; integer inputs are refused.
#include <limits>

#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

const DType kFloatTypes[] = {kFloat32, kFloat64};

void expect_same(const Tensor& want, const Tensor& got, const std::string& what) {
  expect_close(want, got, rtol_for(want.dtype()), atol_for(want.dtype()), what);
}

// softmax of in (CPU) and in_gpu (its twin) into fresh contiguous outputs; returns the CPU result.
Tensor check_softmax(const Tensor& in, const Tensor& in_gpu, int dim, bool log, const std::string& what) {
  Tensor want = empty(in.shape(), Options(in.dtype())), got = empty(in.shape(), Options(in.dtype()).device(gpu()));
  cpu_be().softmax(view(want), view(in), dim, log);
  gpu_be().softmax(view(got), view(in_gpu), dim, log);
  expect_same(want, got, what);
  return want;
}

// Backward from y (the CPU forward result) and a random g (transposed when `strided_grad`).
void check_backward(const Tensor& y, int dim, bool log, bool strided_grad, const std::string& what) {
  Tensor g = randn(y.shape(), Options(y.dtype()));
  Tensor g_gpu = on_cuda(g);
  if (strided_grad && y.dim() >= 2) {
    const int last = y.dim() - 1;
    Shape swapped = y.shape();
    std::swap(swapped[0], swapped[last]);
    const Tensor gb = randn(swapped, Options(y.dtype()));
    g = gb.transpose(0, last);
    g_gpu = on_cuda(gb).transpose(0, last);
  }
  Tensor want = empty(y.shape(), Options(y.dtype())), got = empty(y.shape(), Options(y.dtype()).device(gpu()));
  cpu_be().softmax_backward(view(want), view(g), view(y), dim, log);
  gpu_be().softmax_backward(view(got), view(g_gpu), view(on_cuda(y)), dim, log);
  expect_same(want, got, what);
}

}  // namespace

TEST_CASE("softmax: dims 0, middle and last of a 3-D tensor, forward and backward", "[cuda][softmax]") {
  for (DType t : kFloatTypes)
    for (bool log : {false, true})
      for (int dim = 0; dim < 3; ++dim) {
        const std::string name = fmt::format("{} {} dim {}", log ? "log_softmax" : "softmax", t, dim);
        const Tensor x = randn({6, 33, 10}, Options(t)) * 3.0;
        const Tensor y = check_softmax(x, on_cuda(x), dim, log, name + " contiguous");
        check_backward(y, dim, log, false, name + " backward");
        check_backward(y, dim, log, true, name + " backward, transposed grad");

        // a permuted view of a [10, 6, 33] base (dim's stride differs from the contiguous case)
        const Tensor p = randn({10, 6, 33}, Options(t));
        check_softmax(p.permute({1, 2, 0}), on_cuda(p).permute({1, 2, 0}), dim, log, name + " permuted");
        // a sliced view (every other element of the last dim, rows 1..6 of dim 0)
        const Tensor w = randn({8, 33, 21}, Options(t));
        check_softmax(w.slice(0, 1, 7).slice(2, 0, 20, 2), on_cuda(w).slice(0, 1, 7).slice(2, 0, 20, 2), dim, log,
                      name + " sliced");
      }
}

TEST_CASE("softmax: strided outputs leave the rest of their buffer alone", "[cuda][softmax]") {
  for (DType t : kFloatTypes)
    for (bool log : {false, true}) {
      const Tensor x = randn({12, 40}, Options(t));
      const Tensor init = randn({40, 12}, Options(t));
      Tensor want_base = init.clone(), got_base = on_cuda(init);
      cpu_be().softmax(view(want_base.t()), view(x), 1, log);
      gpu_be().softmax(view(got_base.t()), view(on_cuda(x)), 1, log);
      expect_same(want_base, got_base, fmt::format("{} {} into a transposed output", log, t));

      // grad_in: every other column of a [12, 80] buffer
      const Tensor y = want_base.t().contiguous();
      const Tensor g = randn({12, 40}, Options(t));
      const Tensor gi_init = randn({12, 80}, Options(t));
      Tensor want_gi = gi_init.clone(), got_gi = on_cuda(gi_init);
      cpu_be().softmax_backward(view(want_gi.slice(1, 0, 80, 2)), view(g), view(y), 1, log);
      gpu_be().softmax_backward(view(got_gi.slice(1, 0, 80, 2)), view(on_cuda(g)), view(on_cuda(y)), 1, log);
      expect_same(want_gi, got_gi, fmt::format("{} {} backward into a sliced grad", log, t));
    }
}

TEST_CASE("softmax: long rows, few rows, many short rows, size-1 dim", "[cuda][softmax]") {
  struct Case {
    Shape shape;
    int dim;
  };
  // [3, 5000] last dim: a block per row; [4000, 3] dim 0: strided rows of 4000 with many lanes;
  // [700, 5] last dim: many rows per block; [5, 1, 4] dim 1: a row of one element (→ 1 / 0).
  const Case cases[] = {{{3, 5000}, 1}, {{4000, 3}, 0}, {{700, 5}, 1}, {{5, 1, 4}, 1}, {{2, 300, 3}, 1}};
  for (DType t : kFloatTypes)
    for (bool log : {false, true})
      for (const Case& c : cases) {
        const std::string name =
            fmt::format("{} {} shape {} dim {}", log ? "log_softmax" : "softmax", t, c.shape, c.dim);
        const Tensor x = randn(c.shape, Options(t)) * 4.0;
        const Tensor y = check_softmax(x, on_cuda(x), c.dim, log, name);
        check_backward(y, c.dim, log, false, name + " backward");
      }
  Tensor none = empty({0, 4}, Options(kFloat32).device(gpu()));
  gpu_be().softmax(view(none), view(on_cuda(zeros({0, 4}))), 1, false);
  CHECK(values(none).empty());
}

TEST_CASE("softmax: rows with NaN, +inf, only -inf and huge values behave like the CPU", "[cuda][softmax]") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType t : kFloatTypes)
    for (bool log : {false, true}) {
      Tensor x = randn({6, 300}, Options(t));
      x.slice(0, 0, 1).slice(1, 150, 151).fill_(nan);          // row 0: one NaN → all NaN
      x.slice(0, 1, 2).slice(1, 299, 300).fill_(inf);          // row 1: +inf → NaN (inf − inf)
      x.slice(0, 2, 3).fill_(-inf);                            // row 2: only −inf → NaN
      x.slice(0, 3, 4).slice(1, 0, 100).fill_(-inf);           // row 3: some −inf → 0 there
      x.slice(0, 4, 5).mul_(1e4);                              // row 4: ±1e4, no overflow
      x.slice(0, 5, 6).slice(1, 7, 8).fill_(20000.0);          // row 5: one dominant value
      const std::string name = fmt::format("{} {}", log ? "log_softmax" : "softmax", t);
      const Tensor y = check_softmax(x, on_cuda(x), 1, log, name + " rows");
      check_softmax(x.t(), on_cuda(x).t(), 0, log, name + " strided rows");
      const std::vector<double> yv = values(y);
      CHECK(std::isnan(yv[0 * 300 + 3]));
      CHECK(std::isnan(yv[1 * 300 + 3]));
      CHECK(std::isnan(yv[2 * 300 + 3]));
      CHECK(!std::isnan(yv[3 * 300 + 200]));
      check_backward(y, 1, log, false, name + " backward with NaN rows");
    }
  const Tensor xi = on_cuda(zeros({3, 4}, Options(kInt64)));
  Tensor oi = empty({3, 4}, Options(kInt64).device(gpu()));
  CHECK_THROWS_WITH(gpu_be().softmax(view(oi), view(xi), 1, false), Catch::Contains("softmax") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(gpu_be().softmax_backward(view(oi), view(xi), view(xi), 1, true),
                    Catch::Contains("log_softmax backward"));
}

// test_cuda_matmul.cpp — CudaBackend::matmul against the CPU backend (OpenBLAS): 2-D and batched,
// broadcast batches (stride 0), transposed and sliced operands and outputs, odd sizes that are not
// multiples of the 64×64×16 tiles, accumulate, float32 and float64. On a real GPU every case runs
// with both implementations (cuBLAS and our SIMT kernel); the emulated build has only the SIMT one.
//
// Tolerance: the two sides sum K products in different orders, so each element may differ by about
// K·ε·Σ_k |a_ik·b_kj|; an element passes within rtol·max(1, K/100)·(Σ_k |a_ik b_kj| + |c_ij| when
// accumulating), rtol = 1e-5 (float32) / 1e-12 (float64). The whole output buffer is compared,
// so an element outside the output view must be untouched (equal).
#include <functional>

#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
namespace cu = tapegrad::kernels::cuda;

namespace {

using ViewFn = std::function<Tensor(const Tensor&)>;
const ViewFn kSame = [](const Tensor& t) { return t; };

// The implementations this build has (restores the current one when done).
std::vector<cu::MatmulImpl> impls() {
  if (cu::is_emulated()) return {cu::MatmulImpl::Simt};
  return {cu::MatmulImpl::Cublas, cu::MatmulImpl::Simt};
}
const char* impl_name(cu::MatmulImpl i) { return i == cu::MatmulImpl::Cublas ? "cublas" : "simt"; }

struct ImplGuard {
  cu::MatmulImpl saved = cu::matmul_impl();
  ~ImplGuard() { cu::set_matmul_impl(saved); }
};

// Row-major position of element `i` of a view in its contiguous base's buffer.
int64_t base_position(const Tensor& view_t, const Tensor& base, int64_t i) {
  int64_t pos = view_t.offset() - base.offset();
  for (int d = view_t.dim() - 1; d >= 0; --d) {
    const int64_t size = view_t.shape()[d];
    pos += (i % size) * view_t.strides()[d];
    i /= size;
  }
  return pos;
}

// Runs matmul on both backends: a_view(a_base) @ b_view(b_base) into out_view(out_base) (the same
// views of copies on each device) and compares the whole output buffers.
void check_matmul(const std::string& what, DType dt, const Shape& a_shape, const ViewFn& a_view, const Shape& b_shape,
                  const ViewFn& b_view, const Shape& out_shape, const ViewFn& out_view, bool accumulate,
                  double tf32_rtol = 0.0) {
  const Tensor a_base = randn(a_shape, Options(dt)), b_base = randn(b_shape, Options(dt));
  const Tensor out_init = randn(out_shape, Options(dt));

  const Tensor a_cpu = a_view(a_base), b_cpu = b_view(b_base);
  const Tensor out_cpu_base = out_init.clone();
  const Tensor out_cpu = out_view(out_cpu_base);
  const Tensor a_gpu = a_view(on_cuda(a_base)), b_gpu = b_view(on_cuda(b_base));
  const Tensor out_gpu_base = on_cuda(out_init);
  const Tensor out_gpu = out_view(out_gpu_base);
  REQUIRE(out_cpu.shape() == out_gpu.shape());

  cpu_be().matmul(view(out_cpu), view(a_cpu), view(b_cpu), accumulate);
  gpu_be().matmul(view(out_gpu), view(a_gpu), view(b_gpu), accumulate);

  // Per-element magnitude Σ_k |a_ik b_kj| (+ |c_ij|) at each output position of the base buffer.
  const int nd = out_cpu.dim();
  const int64_t M = out_cpu.shape()[nd - 2], N = out_cpu.shape()[nd - 1], K = a_cpu.shape()[nd - 1];
  const std::vector<double> A = values(a_cpu), B = values(b_cpu), C0 = values(out_init);
  std::vector<double> mag(static_cast<size_t>(out_init.numel()), 0.0);
  const int64_t batches = out_cpu.numel() / std::max<int64_t>(1, M * N);
  for (int64_t bt = 0; bt < batches; ++bt)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += std::abs(A[(bt * M + m) * K + k] * B[(bt * K + k) * N + n]);
        const auto pos = static_cast<size_t>(base_position(out_cpu, out_cpu_base, (bt * M + m) * N + n));
        mag[pos] += s + (accumulate ? std::abs(C0[pos]) : 0.0);
      }

  const double rtol = (tf32_rtol > 0 ? tf32_rtol : rtol_for(dt)) * std::max(1.0, double(K) / 100.0);
  const std::vector<double> want = values(out_cpu_base), got = values(out_gpu_base);
  INFO(what << " " << dtype_name(dt) << (accumulate ? " accumulate" : "") << " impl " << impl_name(cu::matmul_impl()));
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    const bool ok = std::abs(want[i] - got[i]) <= rtol * mag[i] + 1e-30 || want[i] == got[i];
    if (!ok && bad++ == 0) first = static_cast<int64_t>(i);
  }
  if (bad > 0) {
    const auto i = static_cast<size_t>(first);
    FAIL_CHECK(bad << " of " << want.size() << " elements differ; first at " << first << ": cpu " << want[i]
                   << " vs cuda " << got[i] << " (bound " << rtol * mag[i] << ")");
  }
}

// Plain [batch..., M, K] @ [batch..., K, N] → [batch..., M, N].
void check_plain(const std::string& what, DType dt, const Shape& batch, int64_t M, int64_t N, int64_t K,
                 bool accumulate) {
  Shape sa = batch, sb = batch, so = batch;
  for (int64_t d : {M, K}) sa.push_back(d);
  for (int64_t d : {K, N}) sb.push_back(d);
  for (int64_t d : {M, N}) so.push_back(d);
  check_matmul(what, dt, sa, kSame, sb, kSame, so, kSame, accumulate);
}

const DType kFloatTypes[] = {kFloat32, kFloat64};

}  // namespace

TEST_CASE("matmul: 2-D, odd sizes, write and accumulate", "[cuda][matmul]") {
  ImplGuard guard;
  const int64_t sizes[][3] = {{1, 1, 1},   {7, 33, 65},  {65, 7, 33}, {33, 130, 7}, {130, 65, 130},
                              {1, 130, 33}, {130, 1, 65}, {64, 64, 16}, {17, 9, 1}};
  for (cu::MatmulImpl impl : impls()) {
    cu::set_matmul_impl(impl);
    for (DType dt : kFloatTypes)
      for (bool acc : {false, true})
        for (const auto& s : sizes)
          check_plain(fmt::format("M={} N={} K={}", s[0], s[1], s[2]), dt, {}, s[0], s[1], s[2], acc);
  }
}

TEST_CASE("matmul: batched, 3-D and 4-D", "[cuda][matmul]") {
  ImplGuard guard;
  for (cu::MatmulImpl impl : impls()) {
    cu::set_matmul_impl(impl);
    for (DType dt : kFloatTypes)
      for (bool acc : {false, true}) {
        check_plain("[3] x 33x65 @ 65x17", dt, {3}, 33, 17, 65, acc);
        check_plain("[2, 3] x 7x5 @ 9", dt, {2, 3}, 7, 5, 9, acc);
        check_plain("[1, 4] x 70x66 @ 3", dt, {1, 4}, 70, 66, 3, acc);
      }
  }
}

TEST_CASE("matmul: broadcast batches (stride 0) of a, b or both", "[cuda][matmul]") {
  ImplGuard guard;
  for (cu::MatmulImpl impl : impls()) {
    cu::set_matmul_impl(impl);
    for (DType dt : kFloatTypes)
      for (bool acc : {false, true}) {
        // a [1, M, K] broadcast over 4 batches
        check_matmul("a broadcast", dt, {1, 9, 33}, [](const Tensor& t) { return t.expand({4, 9, 33}); },
                     {4, 33, 20}, kSame, {4, 9, 20}, kSame, acc);
        // b [K, N] shared by every batch (a weight), with a [2, 3, M, K]
        check_matmul("b broadcast over 2 dims", dt, {2, 3, 10, 7}, kSame, {7, 65},
                     [](const Tensor& t) { return t.expand({2, 3, 7, 65}); }, {2, 3, 10, 65}, kSame, acc);
        // a [2, 1, M, K] and b [1, 3, K, N]: batch dims that cannot be merged into one stride
        check_matmul("a and b broadcast on different dims", dt, {2, 1, 5, 6},
                     [](const Tensor& t) { return t.expand({2, 3, 5, 6}); }, {1, 3, 6, 8},
                     [](const Tensor& t) { return t.expand({2, 3, 6, 8}); }, {2, 3, 5, 8}, kSame, acc);
      }
  }
}

TEST_CASE("matmul: transposed operands and output", "[cuda][matmul]") {
  ImplGuard guard;
  const ViewFn tr = [](const Tensor& t) { return t.transpose(-2, -1); };
  for (cu::MatmulImpl impl : impls()) {
    cu::set_matmul_impl(impl);
    for (DType dt : kFloatTypes)
      for (bool acc : {false, true}) {
        check_matmul("a transposed", dt, {33, 65}, tr, {33, 7}, kSame, {65, 7}, kSame, acc);
        check_matmul("b transposed", dt, {65, 33}, kSame, {7, 33}, tr, {65, 7}, kSame, acc);
        check_matmul("both transposed", dt, {33, 65}, tr, {7, 33}, tr, {65, 7}, kSame, acc);
        check_matmul("output transposed", dt, {20, 33}, kSame, {33, 70}, kSame, {70, 20}, tr, acc);
        check_matmul("all transposed, batched", dt, {3, 17, 9}, tr, {3, 5, 17}, tr, {3, 5, 9}, tr, acc);
        check_matmul("batched b transposed (q·kᵀ)", dt, {2, 3, 11, 8}, kSame, {2, 3, 13, 8}, tr, {2, 3, 11, 13},
                     kSame, acc);
        check_matmul("a permuted batch-inner", dt, {9, 3, 6}, [](const Tensor& t) { return t.permute({1, 0, 2}); },
                     {3, 6, 4}, kSame, {3, 9, 4}, kSame, acc);
      }
  }
}

TEST_CASE("matmul: sliced operands and outputs", "[cuda][matmul]") {
  ImplGuard guard;
  for (cu::MatmulImpl impl : impls()) {
    cu::set_matmul_impl(impl);
    for (DType dt : kFloatTypes)
      for (bool acc : {false, true}) {
        // row stride larger than the row (a narrow of a wider matrix): BLAS-able with ld > cols
        check_matmul("a narrowed columns", dt, {19, 40}, [](const Tensor& t) { return t.narrow(1, 3, 33); },
                     {33, 9}, kSame, {19, 9}, kSame, acc);
        // a slice with a step: no unit stride (packed for cuBLAS)
        check_matmul("a columns step 2", dt, {19, 66}, [](const Tensor& t) { return t.slice(1, 0, 66, 2); },
                     {33, 9}, kSame, {19, 9}, kSame, acc);
        check_matmul("b rows and columns step 2", dt, {12, 7}, kSame, {14, 30},
                     [](const Tensor& t) { return t.slice(0, 0, 14, 2).slice(1, 1, 30, 3); }, {12, 10}, kSame, acc);
        // output inside a wider buffer (ld > N), and one with a step (computed aside, then written)
        check_matmul("out narrowed", dt, {10, 6}, kSame, {6, 8}, kSame, {12, 20},
                     [](const Tensor& t) { return t.narrow(0, 1, 10).narrow(1, 5, 8); }, acc);
        check_matmul("out step 2 in both dims", dt, {2, 10, 6}, kSame, {2, 6, 8}, kSame, {2, 20, 16},
                     [](const Tensor& t) { return t.slice(1, 0, 20, 2).slice(2, 1, 16, 2); }, acc);
        // a batch slice: every other batch of a
        check_matmul("batch step 2", dt, {6, 5, 7}, [](const Tensor& t) { return t.slice(0, 0, 6, 2); }, {3, 7, 4},
                     kSame, {3, 5, 4}, kSame, acc);
      }
  }
}

TEST_CASE("matmul: empty dims, K = 0, an output shared by the batches", "[cuda][matmul]") {
  ImplGuard guard;
  for (cu::MatmulImpl impl : impls()) {
    cu::set_matmul_impl(impl);
    for (DType dt : kFloatTypes)
      for (bool acc : {false, true}) {
        check_plain("M = 0", dt, {}, 0, 5, 3, acc);
        check_plain("N = 0", dt, {2}, 4, 0, 3, acc);
        check_plain("no batches", dt, {0}, 4, 5, 3, acc);
        check_plain("K = 0 (writes zeros, accumulate leaves out)", dt, {2}, 4, 5, 0, acc);
        // out [M, N] expanded over 3 batches (stride 0): the batches run in order, as on the CPU
        check_matmul("out shared by batches", dt, {3, 5, 6}, kSame, {3, 6, 7}, kSame, {5, 7},
                     [](const Tensor& t) { return t.expand({3, 5, 7}); }, acc);
      }
  }
}

TEST_CASE("matmul: K = 0 overwrites NaN with zeros, beta 0 never reads the output", "[cuda][matmul]") {
  ImplGuard guard;
  for (cu::MatmulImpl impl : impls()) {
    cu::set_matmul_impl(impl);
    for (int64_t K : {0, 5}) {
      const Tensor out = on_cuda(full({3, 4}, std::nan(""), Options(kFloat32)));
      const Tensor a = on_cuda(ones({3, K}, Options(kFloat32))), b = on_cuda(ones({K, 4}, Options(kFloat32)));
      gpu_be().matmul(view(out), view(a), view(b), false);
      for (double v : values(out)) CHECK(v == double(K));
    }
  }
}

TEST_CASE("matmul: unsupported dtypes and mismatched shapes throw", "[cuda][matmul]") {
  const Tensor a = on_cuda(ones({2, 3}, Options(kInt32))), b = on_cuda(ones({3, 2}, Options(kInt32)));
  const Tensor out = on_cuda(ones({2, 2}, Options(kInt32)));
  CHECK_THROWS_WITH(gpu_be().matmul(view(out), view(a), view(b), false), Catch::Contains("matmul"));
  const Tensor af = on_cuda(ones({2, 3})), bf = on_cuda(ones({4, 2})), of = on_cuda(ones({2, 2}));
  CHECK_THROWS_WITH(gpu_be().matmul(view(of), view(af), view(bf), false), Catch::Contains("matmul"));
}

TEST_CASE("matmul: settings (TF32 off by default, impl selection)", "[cuda][matmul]") {
  CHECK_FALSE(cu::allow_tf32());
  if (cu::is_emulated()) {
    CHECK(cu::matmul_impl() == cu::MatmulImpl::Simt);
    CHECK_THROWS_WITH(cu::set_matmul_impl(cu::MatmulImpl::Cublas), Catch::Contains("cuBLAS"));
    return;
  }
  // On a GPU: TF32 keeps ~10 mantissa bits, so it is within 1e-2 of the magnitude but not 1e-5.
  ImplGuard guard;
  cu::set_matmul_impl(cu::MatmulImpl::Cublas);
  cu::set_allow_tf32(true);
  check_matmul("tf32 on", kFloat32, {130, 257}, kSame, {257, 96}, kSame, {130, 96}, kSame, false, 1e-2);
  cu::set_allow_tf32(false);
  CHECK_FALSE(cu::allow_tf32());
  check_matmul("tf32 off again", kFloat32, {130, 257}, kSame, {257, 96}, kSame, {130, 96}, kSame, false);
}

// test_cuda_add_rmsnorm.cpp — the fused residual add + RMSNorm of the CUDA backend
// (kernels/cuda/fused_add_rmsnorm.cu: add_rms_norm, rms_norm_backward_add), on the emulated device in CI and on a
// GPU in scripts/gpu_check.sh:
//  * float32 and float64: bit for bit the composition on the same device (binary add then rms_norm; rms_norm_backward
//    then binary add) — h, y, rstd, grad_x (no residual, out of place, in place), grad_weight, each output alone —
//    and close to the CPU backend (the sums run in another order there: docs/cuda.md); C on both sides of the
//    warp-row / block-row switch (256), R not a multiple of 4, R ≥ 32 (the weight gradient over row chunks),
//    transposed and sliced views (the whole bases compared: nothing outside a view is written), empty shapes;
//  * bfloat16 (every tensor bf16, rstd float32) and the float32 stream with a bf16 branch / y / grad_y: bit for bit
//    the call widened by the bf16 bridge on the same device, and the pass-through bridge counted the call native
//    (no widening); all-bf16 also bit for bit the native composition;
//  * bad shapes and dtypes: one error naming the op, outputs untouched;
//  * no host synchronisation; captured once in a device graph, replayed with new inputs: the eager bits.
#include <functional>
#include <string>
#include <vector>

#include "kernels/bf16_bridge.h"
#include "kernels/binary_op.h"
#include "kernels/device_graph.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/same_bits.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
using testing::elements_differing;

namespace {

using kernels::Backend;
using kernels::BackendFunction;
using kernels::BinaryOp;

constexpr double kSentinel = 7.25;
constexpr double kEps = 1e-5;

Backend& gpu_inner() { return kernels::cuda::cuda_backend(0); }
Backend& gpu_widening() { return kernels::bf16_widening_bridge(gpu_inner()); }
kernels::TensorView none() { return kernels::TensorView{}; }
DType statistic_of(DType x) { return x == kBFloat16 ? kFloat32 : x; }

// 2-D layouts of an [R, C] operand: contiguous, transposed (a [C, R] base), or every other column of an
// [R, 2C + 1] base from column 1.
enum class Layout { Contiguous, Transposed, Sliced };
const char* name(Layout l) {
  return l == Layout::Contiguous ? "contiguous" : (l == Layout::Transposed ? "transposed" : "sliced");
}
Layout other(Layout l) { return l == Layout::Transposed ? Layout::Sliced : Layout::Transposed; }

// A tensor on cuda:0 as the kernels see it (view) inside its base, whose other elements hold kSentinel.
struct Placed {
  Tensor base, view;
};
Placed place2(const Tensor& values, Layout l) {  // values: [R, C] on the CPU (any dtype)
  const int64_t R = values.size(0), C = values.size(1);
  Placed p;
  switch (l) {
    case Layout::Contiguous:
      p.base = on_cuda(values.contiguous());
      p.view = p.base;
      break;
    case Layout::Transposed:
      p.base = on_cuda(values.t().contiguous());
      p.view = p.base.t();
      break;
    case Layout::Sliced:
      p.base = full({R, 2 * C + 1}, kSentinel, Options(values.dtype()).device(gpu()));
      p.view = p.base.slice(1, 1, 1 + 2 * C, 2);
      p.view.copy_(on_cuda(values));
      break;
  }
  return p;
}
Placed sentinel2(int64_t R, int64_t C, DType t, Layout l) { return place2(full({R, C}, kSentinel, Options(t)), l); }
// [n] contiguous, or every other element of a [2n + 3] base from element 3.
Placed place1(const Tensor& values, bool strided) {
  const int64_t n = values.size(0);
  Placed p;
  if (!strided) {
    p.base = on_cuda(values);
    p.view = p.base;
    return p;
  }
  p.base = full({2 * n + 3}, kSentinel, Options(values.dtype()).device(gpu()));
  p.view = p.base.slice(0, 3, 3 + 2 * n, 2);
  p.view.copy_(on_cuda(values));
  return p;
}
Placed sentinel1(int64_t n, DType t, bool strided) { return place1(full({n}, kSentinel, Options(t)), strided); }

Tensor random2(Generator& gen, int64_t R, int64_t C, DType t, double scale = 1.0) {
  return (randn({R, C}, Options(kFloat32), &gen) * scale).to(t);
}

void expect_same_bits(const Placed& want, const Placed& got, const std::string& what) {
  INFO(what);
  CHECK(elements_differing(want.base, got.base) == 0);
}
void expect_close_to_cpu(const Tensor& cpu, const Placed& got, DType t, const std::string& what) {
  expect_close(cpu, got.view, rtol_for(t), atol_for(t), what + " vs the CPU backend");
}

struct Shape2 {
  int64_t R, C;
};
// C ≤ 256: a warp per row (4 rows a block), above: a block per row; R ≥ 32: dw over several row chunks.
const std::vector<Shape2> kShapes = {{1, 1}, {3, 7}, {5, 33}, {7, 256}, {3, 257}, {6, 1000}, {41, 64}, {33, 300}};

// ---------------------------------------------------------------------------------------------- forward

struct Forward {
  Placed h, y, rstd;
};
Forward forward_outputs(int64_t R, int64_t C, DType x, DType y, Layout l, bool strided_rstd) {
  return {sentinel2(R, C, x, l), sentinel2(R, C, y, l), sentinel1(R, statistic_of(x), strided_rstd)};
}

void check_forward(DType dtype, int64_t R, int64_t C, Layout in, Layout out, bool strided_1d, uint64_t seed) {
  INFO(fmt::format("{} R={} C={} inputs {} outputs {} {} weight/rstd", dtype, R, C, name(in), name(out),
                   strided_1d ? "strided" : "contiguous"));
  Generator gen(seed);
  const Tensor xv = random2(gen, R, C, dtype), bv = random2(gen, R, C, dtype, 0.5);
  const Tensor wv = randn({C}, Options(kFloat32), &gen).to(dtype);
  const Placed x = place2(xv, in), branch = place2(bv, other(in)), w = place1(wv, strided_1d);

  const uint64_t syncs = kernels::cuda::sync_count();
  Forward fused = forward_outputs(R, C, dtype, dtype, out, strided_1d);
  gpu_be().add_rms_norm(view(fused.h.view), view(fused.y.view), view(fused.rstd.view), view(x.view), view(branch.view),
                        view(w.view), kEps);
  CHECK(kernels::cuda::sync_count() == syncs);

  Forward composed = forward_outputs(R, C, dtype, dtype, out, strided_1d);
  gpu_be().binary(BinaryOp::Add, view(composed.h.view), view(x.view), view(branch.view));
  gpu_be().rms_norm(view(composed.y.view), view(composed.rstd.view), view(composed.h.view), view(w.view), kEps);
  expect_same_bits(composed.h, fused.h, "h vs binary add on cuda:0");
  expect_same_bits(composed.y, fused.y, "y vs add then rms_norm on cuda:0");
  expect_same_bits(composed.rstd, fused.rstd, "rstd vs add then rms_norm on cuda:0");

  Tensor hc = empty({R, C}, Options(dtype)), yc = empty({R, C}, Options(dtype)), rc = empty({R}, Options(dtype));
  cpu_be().add_rms_norm(view(hc), view(yc), view(rc), view(xv), view(bv), view(wv), kEps);
  expect_close_to_cpu(hc, fused.h, dtype, "h");
  expect_close_to_cpu(yc, fused.y, dtype, "y");
  expect_close_to_cpu(rc, fused.rstd, dtype, "rstd");
}

TEST_CASE("add_rms_norm: float32/float64 = add then rms_norm on the device, bit for bit, close to the CPU",
          "[cuda][add_rmsnorm]") {
  uint64_t seed = 1;
  for (DType dtype : {kFloat32, kFloat64})
    for (const Shape2& s : kShapes)
      for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced})
        check_forward(dtype, s.R, s.C, l, l == Layout::Transposed ? Layout::Sliced : l, l == Layout::Sliced, seed++);
}

TEST_CASE("add_rms_norm: empty shapes", "[cuda][add_rmsnorm]") {
  for (DType dtype : {kFloat32, kFloat64}) {
    check_forward(dtype, 0, 9, Layout::Contiguous, Layout::Contiguous, false, 100);
    check_forward(dtype, 0, 300, Layout::Sliced, Layout::Sliced, true, 101);
    check_forward(dtype, 3, 0, Layout::Contiguous, Layout::Contiguous, false, 102);
  }
}

// ---------------------------------------------------------------------------------------------- backward

enum class Residual { None, OutOfPlace, InPlace };
const char* name(Residual r) {
  return r == Residual::None ? "no residual" : (r == Residual::OutOfPlace ? "residual out of place" : "in place");
}

// The saved inputs of a backward: x, w and x's rstd (computed on cuda:0), and g, grad_residual values.
struct BackwardInputs {
  Tensor xv, wv, gv, resv;
  Placed x, w, g, rstd;
};
BackwardInputs backward_inputs(DType dtype, DType g_dtype, int64_t R, int64_t C, Layout in, bool strided_1d,
                               uint64_t seed) {
  Generator gen(seed);
  BackwardInputs b;
  b.xv = random2(gen, R, C, dtype);
  b.wv = randn({C}, Options(kFloat32), &gen).to(dtype);
  b.gv = random2(gen, R, C, g_dtype);
  b.resv = random2(gen, R, C, dtype, 2.0);
  b.x = place2(b.xv, in);
  b.w = place1(b.wv, strided_1d);
  b.g = place2(b.gv, other(in));
  b.rstd = sentinel1(R, statistic_of(dtype), strided_1d);
  Placed y = sentinel2(R, C, dtype, Layout::Contiguous);
  gpu_be().rms_norm(view(y.view), view(b.rstd.view), view(b.x.view), view(b.w.view), kEps);
  return b;
}

struct Backward {
  Placed dx, dw;
};
// grad_x (laid out as `out`; holding grad_residual's values when in place) and grad_weight, sentinels elsewhere.
Backward backward_outputs(const BackwardInputs& in, DType dtype, Layout out, Residual mode) {
  const int64_t R = in.xv.size(0), C = in.xv.size(1);
  return {mode == Residual::InPlace ? place2(in.resv, out) : sentinel2(R, C, dtype, out),
          place1(full({C}, kSentinel, Options(dtype)), true)};
}

void check_backward(DType dtype, int64_t R, int64_t C, Layout in, Layout out, bool strided_1d, Residual mode,
                    bool want_x, bool want_w, uint64_t seed) {
  INFO(fmt::format("{} R={} C={} inputs {} grad_x {} {} weight/rstd, {}, grad_x {} grad_weight {}", dtype, R, C,
                   name(in), name(out), strided_1d ? "strided" : "contiguous", name(mode), want_x, want_w));
  const BackwardInputs b = backward_inputs(dtype, dtype, R, C, in, strided_1d, seed);
  const Placed res = mode == Residual::OutOfPlace ? place2(b.resv, Layout::Sliced) : Placed{};

  const uint64_t syncs = kernels::cuda::sync_count();
  Backward fused = backward_outputs(b, dtype, out, mode);
  const Tensor& res_view = mode == Residual::InPlace ? fused.dx.view : res.view;
  gpu_be().rms_norm_backward_add(want_x ? view(fused.dx.view) : none(), want_w ? view(fused.dw.view) : none(),
                                 view(b.g.view), view(b.x.view), view(b.w.view), view(b.rstd.view),
                                 mode == Residual::None ? none() : view(res_view));
  CHECK(kernels::cuda::sync_count() == syncs);

  // The composition: rms_norm_backward into a scratch dx, then grad_x = grad_residual + dx.
  Backward composed = backward_outputs(b, dtype, out, Residual::None);
  Placed dx_alone = sentinel2(R, C, dtype, out);
  gpu_be().rms_norm_backward(want_x ? view(dx_alone.view) : none(), want_w ? view(composed.dw.view) : none(),
                             view(b.g.view), view(b.x.view), view(b.w.view), view(b.rstd.view));
  if (mode == Residual::None) {
    composed.dx = dx_alone;
  } else if (want_x) {
    const Placed residual = place2(b.resv, Layout::Contiguous);
    gpu_be().binary(BinaryOp::Add, view(composed.dx.view), view(residual.view), view(dx_alone.view));
  }
  expect_same_bits(composed.dx, fused.dx, "grad_x vs rms_norm_backward then binary add on cuda:0");
  expect_same_bits(composed.dw, fused.dw, "grad_weight vs rms_norm_backward on cuda:0");
  // Not asked for: untouched (the composition's buffers are the sentinels then).
  if (!want_x && R * C > 0) CHECK(values(fused.dx.base)[0] == kSentinel);
  if (!want_w && C > 0) CHECK(values(fused.dw.view)[0] == kSentinel);
  if (mode == Residual::OutOfPlace) CHECK(elements_differing(res.view, b.resv) == 0);  // an input: not written

  Tensor dxc = empty({R, C}, Options(dtype)), dwc = empty({C}, Options(dtype));
  const Tensor rstd_cpu = b.rstd.view.to(Device::cpu()).contiguous();
  cpu_be().rms_norm_backward_add(view(dxc), view(dwc), view(b.gv), view(b.xv), view(b.wv), view(rstd_cpu),
                                 mode == Residual::None ? none() : view(b.resv));
  if (want_x) expect_close_to_cpu(dxc, fused.dx, dtype, "grad_x");
  if (want_w) expect_close_to_cpu(dwc, fused.dw, dtype, "grad_weight");
}

TEST_CASE("rms_norm_backward_add: float32/float64 = rms_norm_backward then add on the device, bit for bit",
          "[cuda][add_rmsnorm]") {
  uint64_t seed = 200;
  for (DType dtype : {kFloat32, kFloat64})
    for (const Shape2& s : kShapes)
      for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced})
        for (Residual mode : {Residual::None, Residual::OutOfPlace, Residual::InPlace})
          check_backward(dtype, s.R, s.C, l, l == Layout::Transposed ? Layout::Sliced : l, l == Layout::Sliced, mode,
                         true, true, seed++);
}

TEST_CASE("rms_norm_backward_add: each output alone, empty shapes", "[cuda][add_rmsnorm]") {
  uint64_t seed = 400;
  for (DType dtype : {kFloat32, kFloat64}) {
    for (Residual mode : {Residual::None, Residual::OutOfPlace, Residual::InPlace}) {
      check_backward(dtype, 50, 70, Layout::Contiguous, Layout::Contiguous, false, mode, true, false, seed++);
      check_backward(dtype, 6, 300, Layout::Sliced, Layout::Sliced, true, mode, true, false, seed++);
    }
    check_backward(dtype, 50, 70, Layout::Contiguous, Layout::Contiguous, false, Residual::None, false, true, seed++);
    check_backward(dtype, 6, 300, Layout::Sliced, Layout::Sliced, true, Residual::None, false, true, seed++);
    check_backward(dtype, 0, 9, Layout::Contiguous, Layout::Contiguous, false, Residual::InPlace, true, true, seed++);
    check_backward(dtype, 0, 300, Layout::Contiguous, Layout::Contiguous, false, Residual::None, true, true, seed++);
    check_backward(dtype, 3, 0, Layout::Contiguous, Layout::Contiguous, false, Residual::OutOfPlace, true, true,
                   seed++);
  }
}

// ---------------------------------------------------------------------------------------------- bfloat16

// Runs `call` through the pass-through bridge (gpu_be()) and returns the bridge's counts of `f` for it.
kernels::Bf16BridgeStats::Counts counted(BackendFunction f, const std::function<void()>& call) {
  const kernels::Bf16BridgeStats before = kernels::bf16_bridge_stats(gpu());
  call();
  return kernels::bf16_bridge_stats(gpu()).since(before)[f];
}
void expect_native(const kernels::Bf16BridgeStats::Counts& c) {
  CHECK(c.native_calls == 1);
  CHECK(c.widened_calls == 0);
  CHECK(c.widened_bytes == 0);
}

void check_bf16_forward(DType x_t, DType b_t, DType y_t, int64_t R, int64_t C, Layout l, uint64_t seed) {
  INFO(fmt::format("x {} branch {} y {} R={} C={} {}", x_t, b_t, y_t, R, C, name(l)));
  Generator gen(seed);
  const Placed x = place2(random2(gen, R, C, x_t), l), branch = place2(random2(gen, R, C, b_t, 0.5), other(l));
  const Placed w = place1(randn({C}, Options(kFloat32), &gen).to(x_t), l == Layout::Sliced);
  const auto run = [&](Backend& be) {
    Forward f = forward_outputs(R, C, x_t, y_t, l, l == Layout::Sliced);
    be.add_rms_norm(view(f.h.view), view(f.y.view), view(f.rstd.view), view(x.view), view(branch.view), view(w.view),
                    kEps);
    return f;
  };
  Forward native;
  expect_native(counted(BackendFunction::AddRmsNorm, [&] { native = run(gpu_be()); }));
  const Forward widened = run(gpu_widening());
  expect_same_bits(widened.h, native.h, "h vs the widened call on cuda:0");
  expect_same_bits(widened.y, native.y, "y vs the widened call on cuda:0");
  expect_same_bits(widened.rstd, native.rstd, "rstd vs the widened call on cuda:0");
  if (x_t == kBFloat16) {  // and the native bf16 add then the native bf16 rms_norm
    Forward composed = forward_outputs(R, C, x_t, y_t, l, l == Layout::Sliced);
    gpu_be().binary(BinaryOp::Add, view(composed.h.view), view(x.view), view(branch.view));
    gpu_be().rms_norm(view(composed.y.view), view(composed.rstd.view), view(composed.h.view), view(w.view), kEps);
    expect_same_bits(composed.h, native.h, "h vs binary add on cuda:0");
    expect_same_bits(composed.y, native.y, "y vs rms_norm on cuda:0");
    expect_same_bits(composed.rstd, native.rstd, "rstd vs rms_norm on cuda:0");
  }
}

TEST_CASE("add_rms_norm: bfloat16 and the float32 stream with bf16 branch/y are native, the widened call's bits",
          "[cuda][add_rmsnorm]") {
  const DType F32 = kFloat32, BF16 = kBFloat16;
  const std::vector<std::vector<DType>> combos = {
      {BF16, BF16, BF16}, {F32, BF16, F32}, {F32, F32, BF16}, {F32, BF16, BF16}};
  uint64_t seed = 600;
  for (const auto& c : combos)
    for (const Shape2& s : std::vector<Shape2>{{5, 64}, {3, 300}, {41, 33}})
      for (Layout l : {Layout::Contiguous, Layout::Sliced}) check_bf16_forward(c[0], c[1], c[2], s.R, s.C, l, seed++);
}

void check_bf16_backward(DType x_t, DType g_t, int64_t R, int64_t C, Layout l, Residual mode, bool want_w,
                         uint64_t seed) {
  INFO(fmt::format("x {} grad_y {} R={} C={} {} {} grad_weight {}", x_t, g_t, R, C, name(l), name(mode), want_w));
  const BackwardInputs b = backward_inputs(x_t, g_t, R, C, l, l == Layout::Sliced, seed);
  const auto run = [&](Backend& be) {
    Backward out = backward_outputs(b, x_t, l, mode);
    const Placed res = mode == Residual::OutOfPlace ? place2(b.resv, Layout::Sliced) : Placed{};
    const Tensor& res_view = mode == Residual::InPlace ? out.dx.view : res.view;
    be.rms_norm_backward_add(view(out.dx.view), want_w ? view(out.dw.view) : none(), view(b.g.view), view(b.x.view),
                             view(b.w.view), view(b.rstd.view), mode == Residual::None ? none() : view(res_view));
    return out;
  };
  Backward native;
  expect_native(counted(BackendFunction::RmsNormBackwardAdd, [&] { native = run(gpu_be()); }));
  const Backward widened = run(gpu_widening());
  expect_same_bits(widened.dx, native.dx, "grad_x vs the widened call on cuda:0");
  expect_same_bits(widened.dw, native.dw, "grad_weight vs the widened call on cuda:0");
}

TEST_CASE("rms_norm_backward_add: bfloat16 and the float32 stream with a bf16 grad_y are native, the widened bits",
          "[cuda][add_rmsnorm]") {
  uint64_t seed = 700;
  for (DType x_t : {kBFloat16, kFloat32})
    for (const Shape2& s : std::vector<Shape2>{{5, 64}, {3, 300}, {41, 33}})
      for (Layout l : {Layout::Contiguous, Layout::Sliced})
        for (Residual mode : {Residual::None, Residual::OutOfPlace, Residual::InPlace})
          check_bf16_backward(x_t, kBFloat16, s.R, s.C, l, mode, mode != Residual::OutOfPlace, seed++);
}

// ---------------------------------------------------------------------------------------------- errors

// `call` throws one error mentioning `op` and `what`, and the outputs' bases keep their bits.
void expect_rejected(const std::function<void()>& call, const std::string& op, const std::string& what,
                     const std::vector<Tensor>& outputs) {
  INFO(op << ": " << what);
  std::vector<Tensor> before;
  for (const Tensor& t : outputs) before.push_back(t.clone());
  CHECK_THROWS_WITH(call(), Catch::Contains(op) && Catch::Contains(what));
  gpu_be().synchronize();
  for (size_t i = 0; i < outputs.size(); ++i) CHECK(elements_differing(outputs[i], before[i]) == 0);
}

TEST_CASE("add_rms_norm / rms_norm_backward_add: bad shapes and dtypes are one error, outputs untouched",
          "[cuda][add_rmsnorm]") {
  const int64_t R = 5, C = 12;
  Generator gen(900);
  const auto dev = [](const Shape& s, DType t, Generator& g) { return on_cuda(randn(s, Options(kFloat32), &g).to(t)); };
  const Tensor x = dev({R, C}, kFloat32, gen), branch = dev({R, C}, kFloat32, gen), w = dev({C}, kFloat32, gen);
  Tensor h = on_cuda(full({R, C}, kSentinel)), y = on_cuda(full({R, C}, kSentinel)),
         rstd = on_cuda(full({R}, kSentinel));
  const std::vector<Tensor> fwd_out = {h, y, rstd};
  Backend& be = gpu_inner();
  const auto fwd = [&](const Tensor& h_, const Tensor& y_, const Tensor& r_, const Tensor& x_, const Tensor& b_,
                       const Tensor& w_) {
    return [&, h_, y_, r_, x_, b_, w_] {
      be.add_rms_norm(view(h_), view(y_), view(r_), view(x_), view(b_), view(w_), kEps);
    };
  };
  expect_rejected(fwd(h, y, rstd, x, dev({R, C + 1}, kFloat32, gen), w), "add_rms_norm", "branch", fwd_out);
  expect_rejected(fwd(h, y, rstd, x, branch, dev({C + 1}, kFloat32, gen)), "add_rms_norm", "weight", fwd_out);
  expect_rejected(fwd(h, y, on_cuda(full({R}, kSentinel, Options(kFloat64))), x, branch, w), "add_rms_norm", "rstd",
                  fwd_out);
  expect_rejected(fwd(on_cuda(full({R, C}, kSentinel, Options(kFloat64))), y, rstd, x, branch, w), "add_rms_norm",
                  "must match x", fwd_out);
  expect_rejected(fwd(h, y, rstd, dev({R, C, 1}, kFloat32, gen), branch, w), "add_rms_norm", "x must be [R, C]",
                  fwd_out);
  {  // float64 x with a bfloat16 branch: no kernel takes it
    Tensor h64 = on_cuda(full({R, C}, kSentinel, Options(kFloat64))),
           y64 = on_cuda(full({R, C}, kSentinel, Options(kFloat64)));
    Tensor r64 = on_cuda(full({R}, kSentinel, Options(kFloat64)));
    expect_rejected(
        fwd(h64, y64, r64, dev({R, C}, kFloat64, gen), dev({R, C}, kBFloat16, gen), dev({C}, kFloat64, gen)),
        "add_rms_norm", "bfloat16", {h64, y64, r64});
  }
  {  // integers
    Tensor hi = on_cuda(full({R, C}, 3.0, Options(kInt64))), yi = hi.clone(),
           ri = on_cuda(full({R}, 3.0, Options(kInt64)));
    const Tensor xi = on_cuda(full({R, C}, 1.0, Options(kInt64))), wi = on_cuda(full({C}, 1.0, Options(kInt64)));
    expect_rejected(fwd(hi, yi, ri, xi, xi, wi), "add_rms_norm", "not supported", {hi, yi, ri});
  }

  Tensor rs = on_cuda(full({R}, 0.5));
  const Tensor g = dev({R, C}, kFloat32, gen);
  Tensor dx = on_cuda(full({R, C}, kSentinel)), dw = on_cuda(full({C}, kSentinel)), res = dev({R, C}, kFloat32, gen);
  const std::vector<Tensor> bwd_out = {dx, dw, res};
  const auto bwd = [&](const kernels::TensorView& dx_, const kernels::TensorView& dw_, const Tensor& g_,
                       const Tensor& x_, const kernels::TensorView& res_) {
    return [&, dx_, dw_, g_, x_, res_] {
      be.rms_norm_backward_add(dx_, dw_, view(g_), view(x_), view(w), view(rs), res_);
    };
  };
  expect_rejected(bwd(none(), view(dw), g, x, view(res)), "rms_norm_backward_add", "grad_residual is given", bwd_out);
  expect_rejected(bwd(view(dx), view(dw), g, x, view(on_cuda(full({R, C}, 1.0, Options(kFloat64))))),
                  "rms_norm_backward_add", "grad_residual", bwd_out);
  expect_rejected(bwd(view(dx), view(dw), dev({R, C + 1}, kFloat32, gen), x, view(res)), "rms_norm_backward_add",
                  "grad_y", bwd_out);
  {  // grad_residual is grad_x's buffer read at other strides (square, transposed)
    Tensor sq = on_cuda(full({C, C}, kSentinel)), xs = dev({C, C}, kFloat32, gen), gs = dev({C, C}, kFloat32, gen);
    Tensor rsq = on_cuda(full({C}, 0.5));
    CHECK_THROWS_WITH(be.rms_norm_backward_add(view(sq), none(), view(gs), view(xs), view(w), view(rsq), view(sq.t())),
                      Catch::Contains("rms_norm_backward_add") && Catch::Contains("other strides"));
    CHECK(values(sq) == values(on_cuda(full({C, C}, kSentinel))));
  }
  {  // float64 x with a bfloat16 grad_y
    Tensor dx64 = on_cuda(full({R, C}, kSentinel, Options(kFloat64))),
           dw64 = on_cuda(full({C}, kSentinel, Options(kFloat64)));
    const Tensor x64 = dev({R, C}, kFloat64, gen), w64 = dev({C}, kFloat64, gen),
                 r64 = on_cuda(full({R}, 0.5, Options(kFloat64)));
    const Tensor g16 = dev({R, C}, kBFloat16, gen);
    expect_rejected(
        [&] { be.rms_norm_backward_add(view(dx64), view(dw64), view(g16), view(x64), view(w64), view(r64), none()); },
        "rms_norm_backward_add", "bfloat16", {dx64, dw64});
  }
}

// ---------------------------------------------------------------------------------------------- capture

TEST_CASE("add_rms_norm + rms_norm_backward_add: captured once, replayed with new inputs = eager bits",
          "[cuda][add_rmsnorm]") {
  // The mixed-precision block: a float32 stream, a bf16 branch in, a bf16 y out, a bf16 grad_y back; R = 70 rows
  // sums the weight gradient over row chunks (its scratch from the graph's pool).
  const int64_t R = 70, C = 48;
  Generator gen(1000);
  const auto fresh = [&](DType t, double scale) { return random2(gen, R, C, t, scale); };
  Tensor x = on_cuda(fresh(kFloat32, 1.0)), branch = on_cuda(fresh(kBFloat16, 0.5)),
         gy = on_cuda(fresh(kBFloat16, 1.0));
  Tensor res = on_cuda(fresh(kFloat32, 1.0));
  const Tensor w = on_cuda(randn({C}, Options(kFloat32), &gen));
  const auto outputs = [&] {
    return std::vector<Tensor>{on_cuda(full({R, C}, kSentinel)), on_cuda(full({R, C}, kSentinel, Options(kBFloat16))),
                               on_cuda(full({R}, kSentinel)), on_cuda(full({R, C}, kSentinel)),
                               on_cuda(full({C}, kSentinel))};
  };
  // h, y, rstd; then grad_x = res + dx (res copied into grad_x first: in place), grad_weight.
  const auto step = [&](std::vector<Tensor>& o) {
    gpu_be().add_rms_norm(view(o[0]), view(o[1]), view(o[2]), view(x), view(branch), view(w), kEps);
    o[3].copy_(res);
    gpu_be().rms_norm_backward_add(view(o[3]), view(o[4]), view(gy), view(o[0]), view(w), view(o[2]), view(o[3]));
  };
  std::vector<Tensor> captured = outputs();
  auto graph = kernels::capture_device_work(gpu_be(), [&] { step(captured); });
  REQUIRE(graph != nullptr);
  CHECK(values(captured[0]) == values(on_cuda(full({R, C}, kSentinel))));  // recorded, not run
  for (int replay = 0; replay < 3; ++replay) {
    INFO("replay " << replay);
    if (replay > 0) {  // new inputs, written where the graph reads them
      x.copy_(on_cuda(fresh(kFloat32, 1.0)));
      branch.copy_(on_cuda(fresh(kBFloat16, 0.5)));
      gy.copy_(on_cuda(fresh(kBFloat16, 1.0)));
      res.copy_(on_cuda(fresh(kFloat32, 1.0)));
    }
    std::vector<Tensor> eager = outputs();
    step(eager);
    graph->replay();
    for (size_t i = 0; i < eager.size(); ++i) {
      INFO("output " << i);
      CHECK(elements_differing(eager[i], captured[i]) == 0);
    }
  }
}

}  // namespace

// test_cuda_elementwise.cpp — CudaBackend fill / copy / unary / unary_backward / binary / where against
// the CPU backend: every UnaryOp (forward and backward) and BinaryOp in float32 and float64 (binary
// ops also in int32 / int64), contiguous, broadcast (stride 0), transposed, sliced and 4-D permuted
// operands, strided outputs, copies between every pair of dtypes, fill of every dtype into a strided
// output (the elements outside the view stay untouched), where with a broadcast cond, empty tensors,
// and the dtype errors.
#include "kernels/binary_op.h"
#include "kernels/unary_op.h"
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
using kernels::BinaryOp;
using kernels::UnaryOp;

namespace {

const DType kAllTypes[] = {kFloat32, kFloat64, kInt32, kInt64, kBool};
const DType kFloatTypes[] = {kFloat32, kFloat64};
const DType kNumericTypes[] = {kFloat32, kFloat64, kInt32, kInt64};

void expect_same(const Tensor& want, const Tensor& got, const std::string& what) {
  const DType t = want.dtype();
  const bool fp = t == kFloat32 || t == kFloat64;
  expect_close(want, got, fp ? rtol_for(t) : 0.0, fp ? atol_for(t) : 0.0, what);
}

// One operand layout: how the [R, C] operand of a test is viewed from a base tensor. The same view
// is taken of the CPU base and of its copy on the GPU.
enum class Layout { Contiguous, Transposed, Sliced, BroadcastRows, BroadcastCols };
const Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::BroadcastRows,
                           Layout::BroadcastCols};
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Sliced: return "sliced";
    case Layout::BroadcastRows: return "broadcast [R,1]";
    case Layout::BroadcastCols: return "broadcast [1,C]";
  }
  return "?";
}
Shape base_shape(Layout l, int64_t r, int64_t c) {
  switch (l) {
    case Layout::Contiguous: return {r, c};
    case Layout::Transposed: return {c, r};
    case Layout::Sliced: return {r + 3, 2 * c + 5};
    case Layout::BroadcastRows: return {r, 1};
    case Layout::BroadcastCols: return {1, c};
  }
  return {};
}
Tensor view_of(const Tensor& base, Layout l, int64_t r, int64_t c) {
  switch (l) {
    case Layout::Contiguous: return base;
    case Layout::Transposed: return base.t();
    case Layout::Sliced: return base.slice(0, 2, 2 + r).slice(1, 3, 3 + 2 * c, 2);
    case Layout::BroadcastRows: return base.expand({r, c});
    case Layout::BroadcastCols: return base.expand({r, c});
  }
  return base;
}

// A CPU tensor and the same view of its GPU copy.
struct Pair {
  Tensor cpu, gpu;
};
Pair make_pair(const Tensor& base, Layout l, int64_t r, int64_t c) {
  return {view_of(base, l, r, c), view_of(on_cuda(base), l, r, c)};
}

// Inputs valid for every unary op: positive for Log / Sqrt / Rsqrt / Pow with a fractional exponent.
bool needs_positive(UnaryOp op, double p) {
  return op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt || (op == UnaryOp::Pow && p != 2.0 && p != 3.0);
}
Tensor unary_input(UnaryOp op, double p, DType t, const Shape& shape) {
  if (needs_positive(op, p)) return (rand(shape, Options(kFloat64)) * 3.0 + 0.05).to(t);
  // N(0, 2²) with some exact zeros (Abs, Relu decide at 0)
  Tensor x = randn(shape, Options(kFloat64)) * 2.0;
  x.slice(1, 0, 1).copy_(zeros({shape[0], 1}, Options(kFloat64)));
  return x.to(t);
}

struct UnaryCase {
  UnaryOp op;
  double param;
};
// Every row of the op table kernels/unary_ops.def: the plain ones (api `unary`) once, the ones with
// a scalar (api `scalar`: Pow, AddScalar, MulScalar) with the scalars listed here.
const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = [] {
    std::vector<UnaryCase> c = {
#define TG_UNARY_CASE_unary(Functor) {UnaryOp::Functor, 0.0},
#define TG_UNARY_CASE_scalar(Functor)
#define TG_UNARY(Functor, name, reads, api) TG_UNARY_CASE_##api(Functor)
#include "kernels/unary_ops.def"
#undef TG_UNARY
#undef TG_UNARY_CASE_unary
#undef TG_UNARY_CASE_scalar
    };
    for (double p : {2.0, 3.0, 0.5, -1.5, 0.0, 1.0}) c.push_back({UnaryOp::Pow, p});
    c.push_back({UnaryOp::AddScalar, -1.25});
    c.push_back({UnaryOp::MulScalar, 3.5});
    return c;
  }();
  return cases;
}

std::string describe_unary(const UnaryCase& u, DType t, Layout l) {
  return fmt::format("{}({}) {} {}", kernels::unary_op_name(u.op), u.param, t, layout_name(l));
}

}  // namespace

TEST_CASE("elementwise: unary forward, every op, float32/float64, strided and broadcast inputs", "[cuda][elementwise]") {
  const int64_t R = 37, C = 19;  // 703 elements: not a multiple of the 256-thread block
  for (const UnaryCase& u : unary_cases())
    for (DType t : kFloatTypes)
      for (Layout l : kLayouts) {
        const Pair x = make_pair(unary_input(u.op, u.param, t, base_shape(l, R, C)), l, R, C);
        Tensor want = empty({R, C}, Options(t)), got = empty({R, C}, Options(t).device(gpu()));
        cpu_be().unary(u.op, view(want), view(x.cpu), u.param);
        gpu_be().unary(u.op, view(got), view(x.gpu), u.param);
        expect_same(want, got, describe_unary(u, t, l));
      }
}

TEST_CASE("elementwise: unary into a transposed output and on a 4-D permuted input", "[cuda][elementwise]") {
  for (DType t : kFloatTypes) {
    // out is the transpose of a contiguous [C, R] buffer
    const Tensor x = randn({23, 41}, Options(t));
    Tensor want_base = empty({41, 23}, Options(t)), got_base = empty({41, 23}, Options(t).device(gpu()));
    cpu_be().unary(UnaryOp::Tanh, view(want_base.t()), view(x), 0.0);
    gpu_be().unary(UnaryOp::Tanh, view(got_base.t()), view(on_cuda(x)), 0.0);
    expect_same(want_base, got_base, fmt::format("tanh into a transposed output {}", t));

    // [3, 4, 5, 6] permuted: no two dims merge
    const Tensor base = randn({5, 3, 6, 4}, Options(t));
    const std::vector<int64_t> perm = {1, 3, 0, 2};
    Tensor want = empty({3, 4, 5, 6}, Options(t)), got = empty({3, 4, 5, 6}, Options(t).device(gpu()));
    cpu_be().unary(UnaryOp::Silu, view(want), view(base.permute(perm)), 0.0);
    gpu_be().unary(UnaryOp::Silu, view(got), view(on_cuda(base).permute(perm)), 0.0);
    expect_same(want, got, fmt::format("silu of a permuted 4-D input {}", t));

    // 1-D operands of one merged dim with stride ≠ 1: every other element in, every third out,
    // and a scalar broadcast to [n] (stride 0) as the second operand of a binary op
    const int64_t n = 301;
    const Tensor v = randn({2 * n}, Options(t));
    const Tensor s = randn({1}, Options(t));
    Tensor want1 = zeros({3 * n}, Options(t)), got1 = on_cuda(zeros({3 * n}, Options(t)));
    cpu_be().unary(UnaryOp::Exp, view(want1.slice(0, 0, 3 * n, 3)), view(v.slice(0, 0, 2 * n, 2)), 0.0);
    gpu_be().unary(UnaryOp::Exp, view(got1.slice(0, 0, 3 * n, 3)), view(on_cuda(v).slice(0, 0, 2 * n, 2)), 0.0);
    expect_same(want1, got1, fmt::format("exp of a 1-D strided vector {}", t));
    Tensor want2 = empty({n}, Options(t)), got2 = empty({n}, Options(t).device(gpu()));
    cpu_be().binary(BinaryOp::Mul, view(want2), view(v.slice(0, 1, 2 * n, 2)), view(s.expand({n})));
    gpu_be().binary(BinaryOp::Mul, view(got2), view(on_cuda(v).slice(0, 1, 2 * n, 2)), view(on_cuda(s).expand({n})));
    expect_same(want2, got2, fmt::format("strided vector times a broadcast scalar {}", t));
  }
}

TEST_CASE("elementwise: unary backward, every op, float32/float64, strided and broadcast operands", "[cuda][elementwise]") {
  const int64_t R = 29, C = 13;
  for (const UnaryCase& u : unary_cases())
    for (DType t : kFloatTypes)
      for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::BroadcastCols}) {
        // x in layout l, y = f(x) contiguous (computed on the CPU, the same on both), g transposed
        const Pair x = make_pair(unary_input(u.op, u.param, t, base_shape(l, R, C)), l, R, C);
        Tensor y = empty({R, C}, Options(t));
        cpu_be().unary(u.op, view(y), view(x.cpu), u.param);
        const Pair g = make_pair(randn({C, R}, Options(t)), Layout::Transposed, R, C);
        const Tensor y_gpu = on_cuda(y);
        Tensor want = empty({R, C}, Options(t)), got = empty({R, C}, Options(t).device(gpu()));
        cpu_be().unary_backward(u.op, view(want), view(g.cpu), view(x.cpu), view(y), u.param);
        gpu_be().unary_backward(u.op, view(got), view(g.gpu), view(x.gpu), view(y_gpu), u.param);
        expect_same(want, got, "backward " + describe_unary(u, t, l));
      }
}

TEST_CASE("elementwise: unary on an empty tensor, and integer inputs are refused", "[cuda][elementwise]") {
  Tensor out = empty({0, 7}, Options(kFloat32).device(gpu()));
  gpu_be().unary(UnaryOp::Exp, view(out), view(on_cuda(zeros({0, 7}))), 0.0);
  CHECK(values(out).empty());
  const Tensor xi = on_cuda(zeros({4}, Options(kInt32)));
  Tensor oi = empty({4}, Options(kInt32).device(gpu()));
  CHECK_THROWS_WITH(gpu_be().unary(UnaryOp::Exp, view(oi), view(xi), 0.0), Catch::Contains("exp") && Catch::Contains("int32"));
  CHECK_THROWS_WITH(gpu_be().unary_backward(UnaryOp::Exp, view(oi), view(xi), view(xi), view(xi), 0.0),
                    Catch::Contains("int32"));
}

namespace {

const BinaryOp kBinaryOps[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Eq,
                               BinaryOp::Ne,  BinaryOp::Lt,  BinaryOp::Le,  BinaryOp::Gt,  BinaryOp::Ge};

// Small integers (as t): many equal pairs, so Eq/Le/Ge are not decided by chance alone; divisors
// never 0. Floats get a fractional part (and NaN at one place) unless `integral`.
Tensor binary_input(DType t, const Shape& shape, bool divisor) {
  Tensor v = randint(-4, 5, shape, Options(kInt64)).to(kFloat64);
  if (divisor) v = v + lt(v.abs(), 0.5).to(kFloat64) * 3.0;  // 0 → 3
  if (t == kFloat32 || t == kFloat64) {
    v = v + lt(rand(shape, Options(kFloat64)), 0.3).to(kFloat64) * 0.375;  // some non-integers
    if (!divisor) v.slice(0, 0, 1).slice(1, 0, 1).fill_(std::nan(""));
  }
  return v.to(t);
}

}  // namespace

TEST_CASE("elementwise: binary ops and comparisons, every dtype, broadcast / transposed / sliced", "[cuda][elementwise]") {
  const int64_t R = 33, C = 17;
  const std::pair<Layout, Layout> layouts[] = {
      {Layout::Contiguous, Layout::Contiguous},    {Layout::BroadcastRows, Layout::BroadcastCols},
      {Layout::Transposed, Layout::Sliced},        {Layout::Sliced, Layout::BroadcastRows},
      {Layout::BroadcastCols, Layout::Transposed},
  };
  for (BinaryOp op : kBinaryOps)
    for (DType t : kNumericTypes)
      for (const auto& [la, lb] : layouts) {
        const Pair a = make_pair(binary_input(t, base_shape(la, R, C), false), la, R, C);
        const Pair b = make_pair(binary_input(t, base_shape(lb, R, C), op == BinaryOp::Div), lb, R, C);
        const DType out_t = kernels::is_comparison(op) ? kBool : t;
        Tensor want = empty({R, C}, Options(out_t)), got = empty({R, C}, Options(out_t).device(gpu()));
        cpu_be().binary(op, view(want), view(a.cpu), view(b.cpu));
        gpu_be().binary(op, view(got), view(a.gpu), view(b.gpu));
        expect_same(want, got,
                    fmt::format("{} {} a {} b {}", kernels::binary_op_name(op), t, layout_name(la), layout_name(lb)));
      }
}

TEST_CASE("elementwise: binary into a strided output, 3-D broadcast, and bool operands refused", "[cuda][elementwise]") {
  for (DType t : kFloatTypes) {
    // out: every other column of a [6, 2·50] buffer, whose other columns must keep their values
    const Tensor a = randn({6, 1, 50}, Options(t)), b = randn({1, 4, 1}, Options(t));
    const Tensor init = randn({6, 4, 100}, Options(t));
    Tensor want_base = init.clone(), got_base = on_cuda(init);
    const Shape shape = {6, 4, 50};
    cpu_be().binary(BinaryOp::Sub, view(want_base.slice(2, 0, 100, 2)), view(a.expand(shape)), view(b.expand(shape)));
    gpu_be().binary(BinaryOp::Sub, view(got_base.slice(2, 0, 100, 2)), view(on_cuda(a).expand(shape)),
                    view(on_cuda(b).expand(shape)));
    expect_same(want_base, got_base, fmt::format("sub into a strided output {}", t));
  }
  const Tensor x = on_cuda(ones({3}, Options(kBool)));
  Tensor o = empty({3}, Options(kBool).device(gpu()));
  CHECK_THROWS_WITH(gpu_be().binary(BinaryOp::Add, view(o), view(x), view(x)), Catch::Contains("bool"));
  Tensor none = empty({0, 3}, Options(kFloat32).device(gpu()));
  const Tensor z = on_cuda(zeros({0, 3}));
  gpu_be().binary(BinaryOp::Mul, view(none), view(z), view(z));
  CHECK(values(none).empty());
}

namespace {

// Values of dtype t that exercise conversions: negative and positive fractions (truncation toward
// zero), exact zeros (→ false), integers up to ±300.
Tensor copy_input(DType t, const Shape& shape) {
  Tensor v = randn(shape, Options(kFloat64)) * 100.0;
  v = v * lt(rand(shape, Options(kFloat64)), 0.8).to(kFloat64);  // ~20 % zeros
  return v.to(t);
}

}  // namespace

TEST_CASE("elementwise: copy between every pair of dtypes, contiguous and strided", "[cuda][elementwise]") {
  for (DType from : kAllTypes)
    for (DType to : kAllTypes)
      for (Layout l : {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::BroadcastRows}) {
        const int64_t R = 21, C = 14;
        const Pair x = make_pair(copy_input(from, base_shape(l, R, C)), l, R, C);
        Tensor want = empty({R, C}, Options(to)), got = empty({R, C}, Options(to).device(gpu()));
        cpu_be().copy(view(want), view(x.cpu));
        gpu_be().copy(view(got), view(x.gpu));
        expect_same(want, got, fmt::format("copy {} -> {} {}", from, to, layout_name(l)));
      }
}

TEST_CASE("elementwise: copy float to int truncates toward zero, copy into a strided output", "[cuda][elementwise]") {
  const Tensor x = tensor({-2.75, -1.5, -0.5, -0.0, 0.25, 0.999, 1.0, 2.5, 7.9, -7.9, 1e6 + 0.5, -3.0}, {12},
                          Options(kFloat32));
  for (DType to : {kInt32, kInt64, kBool}) {
    Tensor got = empty({12}, Options(to).device(gpu()));
    gpu_be().copy(view(got), view(on_cuda(x)));
    const std::vector<double> g = values(got);
    const std::vector<double> want = to == kBool ? std::vector<double>{1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1}
                                                 : std::vector<double>{-2, -1, -0, 0, 0, 0, 1, 2, 7, -7, 1e6, -3};
    CHECK(g == want);
  }
  // into the transpose of a [C, R] buffer, converting float64 → float32, and into a sliced int64 view
  const Tensor src = randn({9, 40}, Options(kFloat64));
  Tensor want_base = zeros({40, 9}, Options(kFloat32)), got_base = on_cuda(zeros({40, 9}, Options(kFloat32)));
  cpu_be().copy(view(want_base.t()), view(src));
  gpu_be().copy(view(got_base.t()), view(on_cuda(src)));
  expect_same(want_base, got_base, "copy into a transposed output");
  const Tensor init = full({9, 90}, -7.0, Options(kInt64));
  Tensor want_i = init.clone(), got_i = on_cuda(init);
  cpu_be().copy(view(want_i.slice(1, 5, 85, 2)), view(src * 10.0));
  gpu_be().copy(view(got_i.slice(1, 5, 85, 2)), view(on_cuda(src * 10.0)));
  expect_same(want_i, got_i, "copy into a sliced int64 output");
}

TEST_CASE("elementwise: fill of every dtype, contiguous and strided outputs", "[cuda][elementwise]") {
  for (DType t : kAllTypes)
    for (double value : {0.0, 2.75, -3.5, 1.0}) {
      // contiguous, 1000 elements
      Tensor got = on_cuda(full({1000}, 5.0, Options(t)));
      gpu_be().fill(view(got), value);
      Tensor want = full({1000}, 5.0, Options(t));
      cpu_be().fill(view(want), value);
      expect_same(want, got, fmt::format("fill {} {}", t, value));

      // strided: the transpose of every third column of a [7, 31] buffer; the rest keeps its values
      const Tensor init = copy_input(t, {7, 31});
      Tensor want_base = init.clone(), got_base = on_cuda(init);
      cpu_be().fill(view(want_base.slice(1, 1, 31, 3).t()), value);
      gpu_be().fill(view(got_base.slice(1, 1, 31, 3).t()), value);
      expect_same(want_base, got_base, fmt::format("fill strided {} {}", t, value));
    }
  Tensor none = empty({5, 0}, Options(kFloat64).device(gpu()));
  gpu_be().fill(view(none), 1.0);
  CHECK(values(none).empty());
}

TEST_CASE("elementwise: where with a broadcast cond, every dtype", "[cuda][elementwise]") {
  const int64_t R = 26, C = 45;
  for (DType t : kAllTypes)
    for (Layout lc : {Layout::BroadcastRows, Layout::BroadcastCols, Layout::Transposed, Layout::Contiguous}) {
      const Pair cond = make_pair(lt(rand(base_shape(lc, R, C), Options(kFloat64)), 0.5), lc, R, C);
      REQUIRE(cond.cpu.dtype() == kBool);
      const Pair a = make_pair(copy_input(t, {R, C}), Layout::Contiguous, R, C);
      const Pair b = make_pair(copy_input(t, {1, C}), Layout::BroadcastCols, R, C);
      Tensor want = empty({R, C}, Options(t)), got = empty({R, C}, Options(t).device(gpu()));
      cpu_be().where(view(want), view(cond.cpu), view(a.cpu), view(b.cpu));
      gpu_be().where(view(got), view(cond.gpu), view(a.gpu), view(b.gpu));
      expect_same(want, got, fmt::format("where {} cond {}", t, layout_name(lc)));
    }
}

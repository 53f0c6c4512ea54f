// test_cuda_bf16.cpp — every Backend function (kernels/backend.h) on cuda:0 with bfloat16 tensors against the
// CPU backend with the same bfloat16 tensors, and a small bfloat16 model's forward and backward on both.
//
// Both backends run bfloat16 through the same bridge (kernels/bf16_bridge.h): widen to float32, run the float32
// kernel, round back. So the bfloat16 results are
//   * bit-identical where the two float32 kernels are (EXACT below): IEEE operations that round once and do not
//     depend on an order of summation — fill, copy, neg/abs/relu/sqrt/add_scalar/mul_scalar and their
//     backward, add/sub/mul/div (÷ and √ are correctly rounded on both), the comparisons, where, max/min and
//     max_along, index_select, gather, index_add/scatter_add with one addition per element, and AdamW (built
//     without FMA contraction, bit-identical in float32: test_cuda_adamw.cpp);
//   * within one bfloat16 ulp (or 1e-5 absolute, for values that cancel to near zero) where the float32 kernels
//     agree to ~1e-6 relative but not bit for bit (CLOSE below): transcendentals (the CPU's fast_math vs CUDA's
//     libdevice), sums in another order (reduce sum, softmax, matmul, cross-entropy, RMSNorm, attention), and FMA
//     contraction (SwiGLU, RoPE). A one-ulp difference is what rounding two float32 values a few float32 ulps
//     apart gives when they straddle a bfloat16 rounding boundary.
// Statistics (attention's lse, RMSNorm's rstd, the cross-entropy loss and its float64 lse) are computed in
// float32 by the float32 kernels and compare with the suite's float32 tolerance (cuda_test_util.h).
//
// Native bfloat16 kernels (Backend::native_bf16: the CUDA backend reads and writes bfloat16 itself for
// elementwise, softmax, cross-entropy, RMSNorm, SwiGLU and RoPE): on cuda:0 every call of such a function must
// give exactly the bits of the same call widened by the bridge on cuda:0 (kernels::bf16_widening_bridge: widen,
// the float32 kernel, round) — the native kernel is the float32 kernel's math with the loads widened and each
// output rounded once — and the bridge must have widened none of its calls (kernels::bf16_bridge_stats).
// A bfloat16 training step on cuda:0 under nn::PrecisionGuard(BF16) then widens nothing for those functions.
#include <functional>
#include <set>

#include "kernels/bf16_bridge.h"
#include "kernels/binary_op.h"
#include "kernels/unary_op.h"
#include "nn/loss.h"
#include "nn/precision.h"
#include "nn/transformer_lm.h"
#include "optim/adamw.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/tiny_lm_config.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

using kernels::Backend;
using kernels::BackendFunction;
using kernels::BinaryOp;
using kernels::ReduceOp;
using kernels::UnaryOp;

// bfloat16-exact inputs of one call, made on the CPU from a fixed seed and copied to `device`, so that the
// CPU and the CUDA run of a call see the same values.
struct Inputs {
  Device device;
  Generator gen;
  Inputs(Device d, uint64_t seed) : device(d), gen(seed) {}
  Tensor bf16(const Shape& s, double scale = 1.0) { return (randn(s, Options(kFloat32), &gen) * scale).to(kBFloat16).to(device); }
  Tensor positive(const Shape& s, double lo = 0.25, double hi = 3.0) {
    return (rand(s, Options(kFloat32), &gen) * (hi - lo) + lo).to(kBFloat16).to(device);
  }
  Tensor f32(const Shape& s) { return randn(s, Options(kFloat32), &gen).to(device); }
  Tensor full_of(const Shape& s, double v, DType t = kBFloat16) { return full(s, v, Options(t).device(device)); }
  Tensor ids(const std::vector<int64_t>& v, const Shape& s) { return from_vector<int64_t>(v, s).to(device); }
  // A forward computed by the CPU backend into a CPU tensor like `like`, then copied to `device`: what a backward
  // reads, so that both backends' backward see the same saved values.
  template <class F>
  Tensor cpu_forward(F&& compute, const Tensor& like) {
    Tensor out = empty(like.shape(), Options(like.dtype()));
    compute(out);
    return out.to(device);
  }
};

struct Call {
  std::string name;
  bool exact;  // bit-identical bfloat16 results expected (see the header)
  std::function<std::vector<Tensor>(Backend&, Inputs&)> run;  // the outputs, on the inputs' device
  std::vector<BackendFunction> functions = {};  // the bridged Backend functions it calls (empty: fill/copy only)
};

// The CUDA backend behind the bridge, and the bridge that widens every bfloat16 call on it (the reference).
Backend& gpu_inner() { return kernels::cuda::cuda_backend(0); }
Backend& gpu_widening() { return kernels::bf16_widening_bridge(gpu_inner()); }

std::vector<uint16_t> bf16_bits(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<uint16_t> b(static_cast<size_t>(c.numel()));
  for (size_t i = 0; i < b.size(); ++i) b[i] = c.data<bfloat16>()[i].bits;
  return b;
}

// Bit-identical, or (close) within one bfloat16 ulp / 1e-5 absolute elementwise.
void expect_bf16(const Tensor& want, const Tensor& got, bool exact, const std::string& what) {
  INFO(what << (exact ? " (bit-identical expected)" : " (within one bf16 ulp expected)"));
  REQUIRE(want.dtype() == kBFloat16);
  REQUIRE(got.dtype() == kBFloat16);
  REQUIRE(want.shape() == got.shape());
  const std::vector<uint16_t> w = bf16_bits(want), g = bf16_bits(got);
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == g[i]) continue;
    bool ok = false;
    if (!exact) {
      const float a = bfloat16::from_bits(w[i]), b = bfloat16::from_bits(g[i]);
      const bool same_sign = (w[i] & 0x8000) == (g[i] & 0x8000);
      const int ulps = std::abs(static_cast<int>(w[i] & 0x7FFF) - static_cast<int>(g[i] & 0x7FFF));
      ok = (same_sign && ulps <= 1 && !std::isnan(a) && !std::isnan(b)) || std::abs(a - b) <= 1e-5f ||
           (std::isnan(a) && std::isnan(b));
    }
    if (!ok && bad++ == 0) first = static_cast<int64_t>(i);
  }
  if (bad > 0) {
    const auto i = static_cast<size_t>(first);
    FAIL_CHECK(bad << " of " << w.size() << " elements differ; first at " << first << ": cpu "
                   << float(bfloat16::from_bits(w[i])) << " (" << fmt::format("{:#06x}", w[i]) << ") vs cuda "
                   << float(bfloat16::from_bits(g[i])) << " (" << fmt::format("{:#06x}", g[i]) << ")");
  }
}

void expect_same(const Tensor& want, const Tensor& got, bool exact, const std::string& what) {
  if (want.dtype() == kBFloat16) return expect_bf16(want, got, exact, what);
  INFO("a " << dtype_name(want.dtype()) << " output (a statistic or an index)");
  // A statistic is computed in float32 by the float32 kernel whatever it is stored in (cross-entropy's lse is
  // float64): float32's tolerance.
  const bool integral = !is_floating(want.dtype());
  expect_close(want, got, integral || exact ? 0.0 : rtol_for(kFloat32), integral || exact ? 0.0 : atol_for(kFloat32),
               what);
}

bool reads_positive_only(UnaryOp op) { return op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt; }
bool unary_exact(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: case UnaryOp::Abs: case UnaryOp::Relu: case UnaryOp::Sqrt:
    case UnaryOp::AddScalar: case UnaryOp::MulScalar: return true;
    default: return false;
  }
}
// The backward of these multiplies the gradient by something exact (−1, a sign, 0/1, 1, p).
bool unary_backward_exact(UnaryOp op) { return op != UnaryOp::Sqrt && unary_exact(op); }

std::vector<Call> calls() {
  std::vector<Call> c;
  // ---- memory and conversion ----
  c.push_back({"copy_on_device of bfloat16 bytes", true, [](Backend& be, Inputs& in) {
                 const Tensor src = in.bf16({37});
                 Tensor dst = in.full_of({37}, 0.0);
                 be.copy_on_device(dst.data_ptr(), src.data_ptr(), 37 * 2);
                 return std::vector<Tensor>{dst};
               }});
  c.push_back({"fill bfloat16 (3.3 → 3.296875, and a transposed view)", true, [](Backend& be, Inputs& in) {
                 Tensor a = in.full_of({5, 3}, 0.0), b = in.full_of({3, 4}, 0.0);
                 be.fill(view(a), 3.3);
                 be.fill(view(b.t()), -1e39);  // beyond the range: −inf
                 return std::vector<Tensor>{a, b};
               }});
  c.push_back({"copy float32 → bfloat16 (rounding), bfloat16 → float32/float64/int64/bool, strided bf16 → bf16", true,
               [](Backend& be, Inputs& in) {
                 const Tensor f = in.f32({6, 5}) * 100.0, h = in.bf16({5, 6}) * 50.0;
                 Tensor to_bf = in.full_of({6, 5}, 0.0), to_f32 = in.full_of({5, 6}, 0.0, kFloat32);
                 Tensor to_f64 = in.full_of({5, 6}, 0.0, kFloat64), to_i = in.full_of({5, 6}, 0.0, kInt64);
                 Tensor to_b = in.full_of({5, 6}, 0.0, kBool), tr = in.full_of({6, 5}, 0.0);
                 be.copy(view(to_bf), view(f));
                 be.copy(view(to_f32), view(h));
                 be.copy(view(to_f64), view(h));
                 be.copy(view(to_i), view(h));
                 be.copy(view(to_b), view(h));
                 be.copy(view(tr), view(h.t()));
                 return std::vector<Tensor>{to_bf, to_f32, to_f64, to_i, to_b, tr};
               }});
  // ---- elementwise ----
  for (int i = 0; i < kernels::kUnaryOpCount; ++i) {
    const auto op = static_cast<UnaryOp>(i);
    const std::string name = kernels::unary_op_name(op);
    c.push_back({"unary " + name, unary_exact(op), [op](Backend& be, Inputs& in) {
                   const Tensor x = reads_positive_only(op) ? in.positive({7, 9}) : in.bf16({7, 9}, 2.0);
                   Tensor y = in.full_of({9, 7}, 0.0).t();  // a strided output
                   be.unary(op, view(y), view(x), op == UnaryOp::Pow ? 3.0 : 0.75);
                   return std::vector<Tensor>{y};
                 }, {BackendFunction::Unary}});
    c.push_back({"unary_backward " + name, unary_backward_exact(op), [op](Backend& be, Inputs& in) {
                   const Tensor x = reads_positive_only(op) ? in.positive({7, 9}) : in.bf16({7, 9}, 2.0);
                   const Tensor g = in.bf16({7, 9});
                   const double p = op == UnaryOp::Pow ? 3.0 : 0.75;
                   // The rule reads x or y = f(x); y is a given input here (any positive values), so the backward
                   // is compared on its own, not through a forward that may differ by an ulp.
                   const Tensor y = in.positive({7, 9}, 0.1, 0.9);
                   Tensor dx = in.full_of({7, 9}, 0.0);
                   be.unary_backward(op, view(dx), view(g), view(x), view(y), p);
                   return std::vector<Tensor>{dx};
                 }, {BackendFunction::UnaryBackward}});
  }
  for (int i = 0; i < kernels::kBinaryOpCount; ++i) {
    const auto op = static_cast<BinaryOp>(i);
    c.push_back({std::string("binary ") + kernels::binary_op_name(op) + " (one operand broadcast)", true,
                 [op](Backend& be, Inputs& in) {
                   const Tensor a = in.bf16({6, 8}), b = in.positive({1, 8}).expand({6, 8});
                   Tensor y = in.full_of({6, 8}, 0.0, kernels::is_comparison(op) ? kBool : kBFloat16);
                   be.binary(op, view(y), view(a), view(b));
                   return std::vector<Tensor>{y};
                 }, {BackendFunction::Binary}});
  }
  c.push_back({"where", true, [](Backend& be, Inputs& in) {
                 const Tensor a = in.bf16({4, 5}), b = in.bf16({4, 5});
                 Tensor cond = in.full_of({4, 5}, 0.0, kBool), y = in.full_of({4, 5}, 0.0);
                 be.binary(BinaryOp::Gt, view(cond), view(a), view(b));
                 be.where(view(y), view(cond), view(a), view(b));
                 return std::vector<Tensor>{y};
               }, {BackendFunction::Binary, BackendFunction::Where}});
  // ---- reductions ----
  c.push_back({"reduce max and min over dim 1", true, [](Backend& be, Inputs& in) {
                 const Tensor x = in.bf16({5, 33, 3});
                 Tensor mx = in.full_of({5, 1, 3}, 0.0), mn = in.full_of({5, 1, 3}, 0.0);
                 be.reduce(ReduceOp::Max, view(mx), view(x));
                 be.reduce(ReduceOp::Min, view(mn), view(x));
                 return std::vector<Tensor>{mx, mn};
               }, {BackendFunction::Reduce}});
  c.push_back({"reduce sum over dims 0 and 2", false, [](Backend& be, Inputs& in) {
                 const Tensor x = in.bf16({40, 6, 17});
                 Tensor s = in.full_of({1, 6, 1}, 0.0);
                 be.reduce(ReduceOp::Sum, view(s), view(x));
                 return std::vector<Tensor>{s};
               }, {BackendFunction::Reduce}});
  c.push_back({"max_along dim 1 (values and Int64 indices)", true, [](Backend& be, Inputs& in) {
                 const Tensor x = in.bf16({4, 50});
                 Tensor v = in.full_of({4, 1}, 0.0), idx = in.full_of({4, 1}, 0.0, kInt64);
                 be.max_along(view(v), view(idx), view(x), 1);
                 return std::vector<Tensor>{v, idx};
               }, {BackendFunction::MaxAlong}});
  for (bool log : {false, true}) {
    c.push_back({log ? "log_softmax and its backward" : "softmax and its backward", false, [log](Backend& be, Inputs& in) {
                   const Tensor x = in.bf16({6, 70}, 3.0), g = in.bf16({6, 70});
                   Tensor y = in.full_of({6, 70}, 0.0), dx = in.full_of({6, 70}, 0.0);
                   be.softmax(view(y), view(x), 1, log);
                   // The backward reads the CPU's forward on both backends (compared on its own).
                   const Tensor y_cpu = in.cpu_forward([&](Tensor& out) {
                     cpu_be().softmax(view(out), view(x.to(Device::cpu())), 1, log);
                   }, y);
                   be.softmax_backward(view(dx), view(g), view(y_cpu), 1, log);
                   return std::vector<Tensor>{y, dx};
                 }, {BackendFunction::Softmax, BackendFunction::SoftmaxBackward}});
  }
  // ---- matmul ----
  c.push_back({"matmul batched, b transposed, then accumulate", false, [](Backend& be, Inputs& in) {
                 const Tensor a = in.bf16({3, 9, 40}), b = in.bf16({3, 17, 40}).transpose(1, 2);
                 Tensor out = in.full_of({3, 9, 17}, 0.0), acc = in.bf16({3, 9, 17});
                 be.matmul(view(out), view(a), view(b), false);
                 be.matmul(view(acc), view(a), view(b), true);
                 return std::vector<Tensor>{out, acc};
               }, {BackendFunction::Matmul}});
  // ---- indexing ----
  c.push_back({"index_select and gather", true, [](Backend& be, Inputs& in) {
                 const Tensor x = in.bf16({5, 6});
                 const Tensor idx = in.ids({4, 0, 4, 2}, {4}), gidx = in.ids({5, 0, 1, 1, 3, 2, 0, 0, 4, 4}, {5, 2});
                 Tensor sel = in.full_of({4, 6}, 0.0), gat = in.full_of({5, 2}, 0.0);
                 be.index_select(view(sel), view(x), 0, view(idx));
                 be.gather(view(gat), view(x), 1, view(gidx));
                 return std::vector<Tensor>{sel, gat};
               }, {BackendFunction::IndexSelect, BackendFunction::Gather}});
  c.push_back({"index_add and scatter_add, one addition per element", true, [](Backend& be, Inputs& in) {
                 Tensor out1 = in.bf16({5, 4}), out2 = in.bf16({3, 6});
                 const Tensor src1 = in.bf16({3, 4}), src2 = in.bf16({3, 2});
                 be.index_add(view(out1), 0, view(in.ids({4, 1, 2}, {3})), view(src1));
                 be.scatter_add(view(out2), 1, view(in.ids({5, 0, 2, 3, 1, 4}, {3, 2})), view(src2));
                 return std::vector<Tensor>{out1, out2};
               }, {BackendFunction::IndexAdd, BackendFunction::ScatterAdd}});
  c.push_back({"index_add and scatter_add with repeated indices", false, [](Backend& be, Inputs& in) {
                 Tensor out1 = in.bf16({3, 4}), out2 = in.bf16({2, 3});
                 const Tensor src1 = in.bf16({6, 4}), src2 = in.bf16({2, 4});
                 be.index_add(view(out1), 0, view(in.ids({0, 2, 0, 0, 2, 1}, {6})), view(src1));
                 be.scatter_add(view(out2), 1, view(in.ids({1, 1, 1, 0, 2, 2, 2, 2}, {2, 4})), view(src2));
                 return std::vector<Tensor>{out1, out2};
               }, {BackendFunction::IndexAdd, BackendFunction::ScatterAdd}});
  // ---- fused ----
  c.push_back({"cross_entropy and its backward (float32 loss, float64 lse)", false, [](Backend& be, Inputs& in) {
                 const Tensor logits = in.bf16({7, 300}, 2.0);
                 const Tensor targets = in.ids({3, 299, -100, 0, 150, 7, 7}, {7});
                 Tensor loss = in.full_of({}, 0.0, kFloat32), lse = in.full_of({7}, 0.0, kFloat64);
                 be.cross_entropy(view(loss), view(lse), view(logits), view(targets), -100);
                 const Tensor g = in.full_of({}, 1.5, kFloat32);
                 Tensor dlogits = in.full_of({7, 300}, 0.0);
                 be.cross_entropy_backward(view(dlogits), view(g), view(logits), view(targets), view(lse), -100);
                 return std::vector<Tensor>{loss, lse, dlogits};
               }, {BackendFunction::CrossEntropy, BackendFunction::CrossEntropyBackward}});
  c.push_back({"rms_norm and its backward (float32 rstd)", false, [](Backend& be, Inputs& in) {
                 const Tensor x = in.bf16({9, 48}), w = in.bf16({48}), gy = in.bf16({9, 48});
                 Tensor y = in.full_of({9, 48}, 0.0), rstd = in.full_of({9}, 0.0, kFloat32);
                 be.rms_norm(view(y), view(rstd), view(x), view(w), 1e-5);
                 const Tensor rstd_cpu = in.cpu_forward([&](Tensor& r) {
                   Tensor y_cpu = y.to(Device::cpu());
                   cpu_be().rms_norm(view(y_cpu), view(r), view(x.to(Device::cpu())), view(w.to(Device::cpu())), 1e-5);
                 }, rstd);
                 Tensor dx = in.full_of({9, 48}, 0.0), dw = in.full_of({48}, 0.0);
                 be.rms_norm_backward(view(dx), view(dw), view(gy), view(x), view(w), view(rstd_cpu));
                 return std::vector<Tensor>{y, rstd, dx, dw};
               }, {BackendFunction::RmsNorm, BackendFunction::RmsNormBackward}});
  c.push_back({"add_rms_norm and rms_norm_backward_add (float32 rstd)", false, [](Backend& be, Inputs& in) {
                 const Tensor x = in.bf16({9, 48}), branch = in.bf16({9, 48}), w = in.bf16({48}), gy = in.bf16({9, 48});
                 const Tensor res = in.bf16({9, 48});
                 Tensor h = in.full_of({9, 48}, 0.0), y = in.full_of({9, 48}, 0.0), rstd = in.full_of({9}, 0.0, kFloat32);
                 be.add_rms_norm(view(h), view(y), view(rstd), view(x), view(branch), view(w), 1e-5);
                 const Tensor rstd_cpu = in.cpu_forward([&](Tensor& r) {
                   Tensor h_cpu = h.to(Device::cpu()), y_cpu = y.to(Device::cpu());
                   cpu_be().add_rms_norm(view(h_cpu), view(y_cpu), view(r), view(x.to(Device::cpu())),
                                         view(branch.to(Device::cpu())), view(w.to(Device::cpu())), 1e-5);
                 }, rstd);
                 Tensor dx = res.clone(), dw = in.full_of({48}, 0.0);
                 be.rms_norm_backward_add(view(dx), view(dw), view(gy), view(x), view(w), view(rstd_cpu), view(dx));
                 return std::vector<Tensor>{h, y, rstd, dx, dw};
               }, {BackendFunction::AddRmsNorm, BackendFunction::RmsNormBackwardAdd}});
  c.push_back({"swiglu and its backward", false, [](Backend& be, Inputs& in) {
                 const Tensor a = in.bf16({5, 33}, 2.0), b = in.bf16({5, 33}), g = in.bf16({5, 33});
                 Tensor y = in.full_of({5, 33}, 0.0), da = in.full_of({5, 33}, 0.0), db = in.full_of({5, 33}, 0.0);
                 be.swiglu(view(y), view(a), view(b));
                 be.swiglu_backward(view(da), view(db), view(g), view(a), view(b));
                 return std::vector<Tensor>{y, da, db};
               }, {BackendFunction::Swiglu, BackendFunction::SwigluBackward}});
  c.push_back({"rope and its inverse", false, [](Backend& be, Inputs& in) {
                 const Tensor x = in.bf16({2, 5, 8}), cos = in.bf16({6, 4}), sin = in.bf16({6, 4});
                 const Tensor pos = in.ids({5, 0, 3, 3, 1}, {5});
                 Tensor y = in.full_of({2, 5, 8}, 0.0), back = in.full_of({2, 5, 8}, 0.0);
                 be.rope(view(y), view(x), view(cos), view(sin), view(pos), false);
                 be.rope(view(back), view(x), view(cos), view(sin), view(pos), true);
                 return std::vector<Tensor>{y, back};
               }, {BackendFunction::Rope}});
  c.push_back({"causal_attention and its backward, GQA (float32 lse)", false, [](Backend& be, Inputs& in) {
                 const Tensor q = in.bf16({1, 4, 19, 16}), k = in.bf16({1, 2, 19, 16}), v = in.bf16({1, 2, 19, 16});
                 const Tensor go = in.bf16({1, 4, 19, 16});
                 Tensor out = in.full_of({1, 4, 19, 16}, 0.0), lse = in.full_of({1, 4, 19}, 0.0, kFloat32);
                 be.causal_attention(view(out), view(lse), view(q), view(k), view(v), 0.25);
                 // The backward reads the CPU's forward (out, lse) on both backends: compared on its own.
                 Tensor out_cpu = out.to(Device::cpu());
                 const Tensor lse_cpu = in.cpu_forward([&](Tensor& l) {
                   cpu_be().causal_attention(view(out_cpu), view(l), view(q.to(Device::cpu())), view(k.to(Device::cpu())),
                                             view(v.to(Device::cpu())), 0.25);
                 }, lse);
                 const Tensor out_saved = out_cpu.to(in.device);
                 Tensor dq = in.full_of({1, 4, 19, 16}, 0.0), dk = in.full_of({1, 2, 19, 16}, 0.0),
                        dv = in.full_of({1, 2, 19, 16}, 0.0);
                 be.causal_attention_backward(view(dq), view(dk), view(dv), view(go), view(q), view(k), view(v),
                                              view(out_saved), view(lse_cpu), 0.25);
                 return std::vector<Tensor>{out, lse, dq, dk, dv};
               }, {BackendFunction::CausalAttention, BackendFunction::CausalAttentionBackward}});
  // ---- optimizer ----
  c.push_back({"adamw_update and adamw_update_many on bfloat16 tensors", true, [](Backend& be, Inputs& in) {
                 const kernels::AdamWStep s{1e-2, 0.9, 0.999, 1e-8, 0.1, 1 - 0.9 * 0.9, 1 - 0.999 * 0.999};
                 Tensor p = in.bf16({7, 5}), m = in.bf16({7, 5}, 0.1), v = in.positive({7, 5}, 0.0, 0.01);
                 const Tensor g = in.bf16({7, 5});
                 be.adamw_update(view(p), view(g), view(m), view(v), s);
                 Tensor p2 = in.bf16({11}), m2 = in.bf16({11}, 0.1), v2 = in.positive({11}, 0.0, 0.01);
                 Tensor p3 = in.bf16({3, 2}), m3 = in.bf16({3, 2}, 0.1), v3 = in.positive({3, 2}, 0.0, 0.01);
                 const Tensor g2 = in.bf16({11}), g3 = in.bf16({3, 2});
                 be.adamw_update_many({{view(p2), view(g2), view(m2), view(v2)}, {view(p3), view(g3), view(m3), view(v3)}}, s);
                 return std::vector<Tensor>{p, m, v, p2, m2, v2, p3, m3, v3};
               }, {BackendFunction::AdamW}});
  return c;
}

uint64_t seed_of(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

}  // namespace

TEST_CASE("bf16: every backend function on cuda:0 matches the CPU in bfloat16", "[cuda][bf16]") {
  int exact = 0, close = 0, native_checked = 0;
  std::set<BackendFunction> native_seen;
  for (const Call& call : calls()) {
    INFO(call.name);
    Inputs cpu_in(Device::cpu(), seed_of(call.name)), gpu_in(gpu(), seed_of(call.name)), ref_in(gpu(), seed_of(call.name));
    bool native = false;  // the call uses a function the CUDA backend takes in bfloat16 itself
    for (BackendFunction f : call.functions) native |= gpu_inner().native_bf16(f);
    std::vector<Tensor> want, got, widened;
    kernels::Bf16BridgeStats used;
    try {
      want = call.run(cpu_be(), cpu_in);
      const kernels::Bf16BridgeStats before = kernels::bf16_bridge_stats(gpu());
      got = call.run(gpu_be(), gpu_in);
      gpu_be().synchronize();
      used = kernels::bf16_bridge_stats(gpu()).since(before);
      if (native) widened = call.run(gpu_widening(), ref_in);
      gpu_be().synchronize();
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << e.what());
      continue;
    }
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      CHECK(got[i].device() == gpu());
      expect_same(want[i], got[i], call.exact, "output #" + std::to_string(i));
    }
    ++(call.exact ? exact : close);
    // The native kernels: no widening, and exactly the widened float32 kernel's bits on the same device.
    for (BackendFunction f : call.functions) {
      if (!gpu_inner().native_bf16(f)) continue;
      INFO(kernels::backend_function_name(f) << " is native on cuda:0");
      CHECK(used[f].widened_calls == 0);
      CHECK(used[f].widened_bytes == 0);
      CHECK(used[f].native_calls > 0);
      native_seen.insert(f);
    }
    if (native) {
      REQUIRE(widened.size() == got.size());
      for (size_t i = 0; i < got.size(); ++i)
        expect_same(widened[i], got[i], /*exact=*/true, "output #" + std::to_string(i) + " vs the widened call on cuda:0");
      ++native_checked;
    }
  }
  CHECK(exact > 0);
  CHECK(close > 0);
  CHECK(native_checked > 0);
  // Every function the backend claims was exercised natively by some call above.
  for (int i = 0; i < kernels::kBackendFunctionCount; ++i) {
    const auto f = static_cast<BackendFunction>(i);
    INFO(kernels::backend_function_name(f));
    if (gpu_inner().native_bf16(f)) CHECK(native_seen.count(f) == 1);
  }
}

TEST_CASE("bf16: the bridge counts what it widens and what it passes through", "[cuda][bf16]") {
  // The CPU is always bridged: one unary call on 6 bfloat16 elements widens the input and the output (2 × 24
  // bytes of float32 scratch); the same call on cuda:0 goes through untouched where the backend takes it.
  const Tensor x = tensor({1.0, -2.0, 3.5, 0.25, -0.5, 7.0}, Options(kBFloat16));
  for (Device d : {Device::cpu(), gpu()}) {
    INFO(d.str());
    const Tensor xd = x.to(d);
    Tensor y = full({6}, 0.0, Options(kBFloat16).device(d));
    const kernels::Bf16BridgeStats before = kernels::bf16_bridge_stats(d);
    kernels::backend(d).unary(UnaryOp::Exp, view(y), view(xd), 0.0);
    const kernels::Bf16BridgeStats::Counts c = kernels::bf16_bridge_stats(d).since(before)[BackendFunction::Unary];
    const bool native = kernels::backend(d).native_bf16(BackendFunction::Unary);
    CHECK(native == (d == gpu()));
    CHECK(c.widened_calls == (native ? 0u : 1u));
    CHECK(c.widened_bytes == (native ? 0u : 2u * 6u * sizeof(float)));
    CHECK(c.native_calls == (native ? 1u : 0u));
  }
  // The widening bridge widens a call the backend would take itself (and is not counted).
  CHECK_FALSE(gpu_widening().native_bf16(BackendFunction::Unary));
}

TEST_CASE("bf16: the bit-level comparison notices a one-ulp difference where bits must match", "[cuda][bf16]") {
  // So the EXACT class can fail: a tensor and its copy with one element moved by one ulp.
  const Tensor a = tensor({1.0, 2.0, -3.0}, Options(kBFloat16));
  Tensor b = a.clone();
  b.data<bfloat16>()[1] = bfloat16::from_bits(static_cast<uint16_t>(b.data<bfloat16>()[1].bits + 1));
  const std::vector<uint16_t> wa = bf16_bits(a), wb = bf16_bits(b);
  CHECK(wa != wb);
  CHECK(wa[1] + 1 == wb[1]);
}

TEST_CASE("bf16: a bfloat16 TransformerLM's forward and backward on cuda:0 match the CPU", "[cuda][bf16]") {
  const nn::TransformerLMConfig c = testing::tiny_gqa_lm(kBFloat16);
  Generator gen(17);
  nn::TransformerLM cpu_model(c, &gen), gpu_model(c, &gen);
  gpu_model.load_state_dict(cpu_model.state_dict());
  gpu_model.to(gpu());
  const Tensor ids = randint(0, 64, {2, 16}, kInt64, &gen), targets = randint(0, 64, {2, 16}, kInt64, &gen);

  const Tensor logits_cpu = cpu_model.forward(ids), logits_gpu = gpu_model.forward(ids.to(gpu()));
  REQUIRE(logits_gpu.dtype() == kBFloat16);
  REQUIRE(logits_gpu.device() == gpu());
  const Tensor loss_cpu = nn::cross_entropy(logits_cpu, targets);
  const Tensor loss_gpu = nn::cross_entropy(logits_gpu, targets.to(gpu()));
  CHECK(loss_gpu.dtype() == kFloat32);
  // Each bf16 intermediate may differ by one ulp where the float32 kernels differ in the last bits; over two
  // layers that stays far below bf16 vs float32 (test_bf16_ops.cpp): 1 % of the norm, 0.1 % of the loss.
  auto norm_rel = [](const Tensor& a, const Tensor& b) {
    const std::vector<double> x = values(a), y = values(b);
    double d = 0, n = 0;
    for (size_t i = 0; i < x.size(); ++i) d += (x[i] - y[i]) * (x[i] - y[i]), n += y[i] * y[i];
    return std::sqrt(d / n);
  };
  CHECK(norm_rel(logits_gpu, logits_cpu) <= 1e-2);
  CHECK(std::abs(loss_gpu.item() - loss_cpu.item()) <= 1e-3 * std::abs(loss_cpu.item()));
  loss_cpu.backward();
  loss_gpu.backward();
  std::map<std::string, Tensor> grads_cpu;
  for (const auto& [name, p] : cpu_model.named_parameters()) grads_cpu[name] = p.grad();
  for (const auto& [name, p] : gpu_model.named_parameters()) {
    INFO("grad of " << name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().dtype() == kBFloat16);
    CHECK(p.grad().device() == gpu());
    CHECK(norm_rel(p.grad(), grads_cpu.at(name)) <= 2e-2);
  }
}

TEST_CASE("bf16: a mixed-precision training step on cuda:0 widens nothing the backend takes natively",
          "[cuda][bf16]") {
  // float32 master weights, the step under PrecisionGuard(BF16) (matmuls, attention, SwiGLU, RoPE and the logits
  // in bfloat16), AdamW: the same step on the CPU (bridged) and on cuda:0.
  const nn::TransformerLMConfig c = testing::tiny_gqa_lm();
  Generator gen(23);
  nn::TransformerLM cpu_model(c, &gen), gpu_model(c, &gen);
  gpu_model.load_state_dict(cpu_model.state_dict());
  gpu_model.to(gpu());
  const double lr = 1e-3;
  optim::AdamW cpu_opt(cpu_model.parameters(), optim::AdamWOptions(lr).weight_decay(0.1));
  optim::AdamW gpu_opt(gpu_model.parameters(), optim::AdamWOptions(lr).weight_decay(0.1));
  const Tensor ids = randint(0, 64, {2, 16}, kInt64, &gen), targets = randint(0, 64, {2, 16}, kInt64, &gen);
  auto forward_backward = [](nn::TransformerLM& m, const Tensor& x, const Tensor& y) {
    nn::PrecisionGuard bf16(nn::Precision::BF16);
    Tensor loss = nn::cross_entropy(m.forward(x), y);
    loss.backward();
    return loss;
  };

  const Tensor loss_cpu = forward_backward(cpu_model, ids, targets);
  const kernels::Bf16BridgeStats before = kernels::bf16_bridge_stats(gpu());
  const Tensor loss_gpu = forward_backward(gpu_model, ids.to(gpu()), targets.to(gpu()));
  gpu_opt.step();
  gpu_be().synchronize();
  const kernels::Bf16BridgeStats used = kernels::bf16_bridge_stats(gpu()).since(before);
  cpu_opt.step();

  // Nothing the backend takes natively was widened; the step did run bfloat16 calls natively (the loss from
  // bfloat16 logits and its gradient, the SwiGLU gate, RoPE).
  for (int i = 0; i < kernels::kBackendFunctionCount; ++i) {
    const auto f = static_cast<BackendFunction>(i);
    const kernels::Bf16BridgeStats::Counts& n = used[f];
    INFO(kernels::backend_function_name(f) << ": " << n.widened_calls << " calls widened (" << n.widened_bytes
                                           << " bytes), " << n.native_calls << " native");
    if (gpu_inner().native_bf16(f)) CHECK(n.widened_calls == 0);
  }
  for (BackendFunction f : {BackendFunction::CrossEntropy, BackendFunction::CrossEntropyBackward,
                            BackendFunction::Swiglu, BackendFunction::SwigluBackward, BackendFunction::Rope}) {
    INFO(kernels::backend_function_name(f));
    CHECK(used[f].native_calls > 0);
  }

  // The CPU's bfloat16 step within the tolerances of the forward/backward test above.
  auto norm_rel = [](const Tensor& a, const Tensor& b) {
    const std::vector<double> x = values(a), y = values(b);
    double d = 0, n = 0;
    for (size_t i = 0; i < x.size(); ++i) d += (x[i] - y[i]) * (x[i] - y[i]), n += y[i] * y[i];
    return std::sqrt(d / n);
  };
  CHECK(loss_gpu.dtype() == kFloat32);
  CHECK(std::abs(loss_gpu.item() - loss_cpu.item()) <= 1e-3 * std::abs(loss_cpu.item()));
  std::map<std::string, Tensor> cpu_params;
  for (const auto& [name, p] : cpu_model.named_parameters()) cpu_params[name] = p;
  for (const auto& [name, p] : gpu_model.named_parameters()) {
    INFO("parameter " << name);
    const Tensor& q = cpu_params.at(name);
    REQUIRE(p.grad().defined());
    CHECK(p.grad().dtype() == kFloat32);  // master weights' gradients
    CHECK(norm_rel(p.grad(), q.grad()) <= 2e-2);
    // One AdamW step moves an element by at most ~lr (m̂/√v̂ ≈ ±1 at step 1): the two steps agree to 2·lr even
    // where a gradient near 0 has the other sign on the other device, and to 1e-3 of the norm overall.
    const std::vector<double> a = values(p), b = values(q);
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    CHECK(worst <= 2.02 * lr);
    CHECK(norm_rel(p, q) <= 1e-3);
  }
}

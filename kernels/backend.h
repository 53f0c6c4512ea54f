// backend.h — the narrow interface between autograd/ and the compute backends (cpu/, cuda/).
//
// Every function works on TensorViews: a raw pointer (already offset to the first element),
// a dtype, a shape and strides in elements. Outputs are allocated by the caller. Inputs of an
// elementwise function are already broadcast to the output's shape (stride 0 on broadcast
// dims), so a backend never implements broadcasting rules itself. Autograd and nn see only
// this header: never BLAS, OpenMP or CUDA types.
//
// Adding a backend: implement Backend, return it from backend() in registry.cpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/device_graph.h"
#include "kernels/dtype.h"
#include "kernels/shape.h"
#include "kernels/token_sampling.h"

namespace tapegrad::kernels {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::Float32;
  Shape shape;
  Shape strides;  // in elements
  int ndim() const { return shape.size(); }
  int64_t numel() const { return shape.numel(); }
  bool is_contiguous() const;
};

// Elementwise functions of one tensor (Neg, Exp, …, Pow, AddScalar, MulScalar) and of two (Add, Sub, …,
// Ge): one value per row of the op tables kernels/unary_ops.def and kernels/binary_ops.def. Declared
// here without their values, which kernels/unary_op.h and kernels/binary_op.h define: a file that
// only passes an op along needs no table, so a new row does not recompile every file that includes
// this header.
enum class UnaryOp : uint8_t;
enum class BinaryOp : uint8_t;
enum class ReduceOp : uint8_t { Sum, Max, Min };

const char* unary_op_name(UnaryOp op);  // the table's name column: "exp", "add_scalar", …
const char* binary_op_name(BinaryOp op);

// The scalars of one AdamW update (see Backend::adamw_update).
struct AdamWStep {
  double lr, beta1, beta2, eps, weight_decay;
  double bias_correction1, bias_correction2;  // 1 − β1^t, 1 − β2^t
};

// The four tensors of one parameter's AdamW update (see Backend::adamw_update_many).
struct AdamWTensors {
  TensorView param, grad, exp_avg, exp_avg_sq;
};

// The Backend functions that take bfloat16 tensors through the bf16 bridge (kernels/bf16_bridge.h), for
// Backend::native_bf16 and the bridge's counters. fill and copy are not listed: every backend stores
// bfloat16 in them itself. Matmul is asked per call instead (Backend::matmul_bf16_native).
enum class BackendFunction : uint8_t {
  Unary, UnaryBackward, Binary, Where, Reduce, MaxAlong, Softmax, SoftmaxBackward, Matmul,
  IndexSelect, IndexAdd, Gather, ScatterAdd, CrossEntropy, CrossEntropyBackward, RmsNorm, RmsNormBackward,
  AddRmsNorm, RmsNormBackwardAdd, Swiglu, SwigluBackward, Rope, CausalAttention, CausalAttentionBackward, AdamW,
};
inline constexpr int kBackendFunctionCount = static_cast<int>(BackendFunction::AdamW) + 1;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

  // ---- memory ----
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* p, size_t nbytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t nbytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t nbytes) = 0;
  // dst and src both on this backend's device (ordered like a kernel; no host synchronisation).
  virtual void copy_on_device(void* dst, const void* src, size_t nbytes) = 0;
  // Waits for all queued work. The CPU runs everything at once; a GPU backend counts these
  // (kernels/cuda/cuda_backend.h: sync_count), and a training step must not need one.
  virtual void synchronize() {}

  // ---- elementwise ----
  virtual void fill(const TensorView& out, double value) = 0;
  // out = in, any strides, converting between dtypes (float→int truncates toward zero).
  virtual void copy(const TensorView& out, const TensorView& in) = 0;
  virtual void unary(UnaryOp op, const TensorView& out, const TensorView& in, double param) = 0;
  // grad_in = grad_out · f'(x), where y = f(x) (each rule reads whichever of x, y it needs).
  virtual void unary_backward(UnaryOp op, const TensorView& grad_in, const TensorView& grad_out,
                              const TensorView& x, const TensorView& y, double param) = 0;
  virtual void binary(BinaryOp op, const TensorView& out, const TensorView& a, const TensorView& b) = 0;
  // out = cond ? a : b   (cond is Bool)
  virtual void where(const TensorView& out, const TensorView& cond, const TensorView& a, const TensorView& b) = 0;

  // ---- reductions ----
  // out has in's ndim with size 1 on every reduced dim (the keepdim shape).
  virtual void reduce(ReduceOp op, const TensorView& out, const TensorView& in) = 0;
  // values/indices (Int64) have in's shape with size 1 at dim; the first maximum wins, NaN beats all.
  virtual void max_along(const TensorView& values, const TensorView& indices, const TensorView& in, int dim) = 0;
  // Numerically stable softmax / log-softmax along dim, and their backward from the output y:
  //   softmax:     dx = y ⊙ (g − Σ_dim g⊙y)        log_softmax: dx = g − exp(y) ⊙ Σ_dim g
  virtual void softmax(const TensorView& out, const TensorView& in, int dim, bool log) = 0;
  virtual void softmax_backward(const TensorView& grad_in, const TensorView& grad_out, const TensorView& y, int dim,
                                bool log) = 0;

  // ---- matmul ----
  // out[..., M, N] = a[..., M, K] @ b[..., K, N] (+ out when accumulate). All three have the same
  // batch shape; a and b may broadcast it with stride 0. Transposed operands (column-major
  // strides) go to BLAS as transpose flags, never as copies.
  virtual void matmul(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) = 0;
  // The same with a and b bfloat16 and out bfloat16 (float32 accumulation, out rounded once) or float32 (a
  // gradient gathered in float32: not rounded), when this backend has a kernel of its own for it (the GPU's
  // tensor cores); false: nothing was done, and the bf16 bridge (kernels/bf16_bridge.h) widens to float32
  // around matmul() instead.
  virtual bool matmul_bf16_native(const TensorView& out, const TensorView& a, const TensorView& b, bool accumulate) {
    (void)out, (void)a, (void)b, (void)accumulate;
    return false;
  }
  // True when this backend's own kernel of `f` takes bfloat16 tensors: it reads and writes bfloat16 storage,
  // computes in float32 inside and rounds each output once — the same values as the bridge's widen / float32
  // kernel / round, without the passes. The bf16 bridge then hands it every call of `f` whose operands are
  // bfloat16 where the function takes bfloat16 (its statistics — cross-entropy's loss and grad_loss,
  // RMSNorm's rstd — float32, cross-entropy's lse float64); a call mixing bfloat16 with float32 operands
  // is widened as before. Default: none (the CPU, the oracle, is always bridged).
  virtual bool native_bf16(BackendFunction f) const {
    (void)f;
    return false;
  }

  // ---- indexing (index is Int32 or Int64; every index is bounds-checked before anything is written) ----
  // out = in with dim taken at index (1-D): out.shape[dim] == index.numel()
  virtual void index_select(const TensorView& out, const TensorView& in, int dim, const TensorView& index) = 0;
  // out[.., index[j], ..] += src[.., j, ..]   (repeated indices accumulate)
  virtual void index_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) = 0;
  // out[i][j][k] = in[i][index[i][j][k]][k] for dim 1 (torch.gather); index has out's shape.
  virtual void gather(const TensorView& out, const TensorView& in, int dim, const TensorView& index) = 0;
  // out[i][index[i][j][k]][k] += src[i][j][k] for dim 1; src has index's shape.
  virtual void scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) = 0;
  // out[.., index[j], ..] = src[.., j, ..]: rows of src written over rows of out along dim (1-D index; src has
  // out's shape but index.numel() at dim; one dtype, stored as is — bfloat16 included, like copy). A repeated
  // index: the last j's row is written (on every backend). A bad index throws (the GPU: at the next check,
  // as index_select) and nothing is written. Generation writes a decode step's K, V into the KV cache at a
  // position held in device memory with it (nn/kv_cache.h).
  virtual void index_copy(const TensorView& out, int dim, const TensorView& index, const TensorView& src) = 0;

  // ---- Fused Transformer kernels (cross-entropy, RMSNorm, SwiGLU) ----
  // Each has a composition of the functions above as its reference (tests/test_fused_ops.cpp).
  // Cross-entropy over the rows of logits [N, V] (any strides), targets [N] Int64/Int32:
  //   lse_i = log Σ_j exp(x_ij) (max subtracted first),  loss_i = lse_i − x_i,t_i
  //   loss (one element, logits' dtype) = Σ_valid loss_i / N_valid (NaN when no row is valid);
  //   lse [N] Float64 (0 on ignored rows) is what backward reads.
  // A target outside [0, V) that is not ignore_index throws before anything is written.
  virtual void cross_entropy(const TensorView& loss, const TensorView& lse, const TensorView& logits,
                             const TensorView& targets, int64_t ignore_index) = 0;
  //   dlogits = (softmax(x) − onehot(t))·g/N_valid on valid rows, 0 on ignored rows (g: grad_loss, one element)
  virtual void cross_entropy_backward(const TensorView& grad_logits, const TensorView& grad_loss,
                                      const TensorView& logits, const TensorView& targets, const TensorView& lse,
                                      int64_t ignore_index) = 0;
  // RMSNorm of the rows of x [R, C] with weight w [C] (x's dtype): r = 1/sqrt(mean_j x_j² + eps),
  // y = x·r·w; rstd [R] (x's dtype) receives r.
  virtual void rms_norm(const TensorView& y, const TensorView& rstd, const TensorView& x, const TensorView& weight,
                        double eps) = 0;
  //   gw = g⊙w:  dx = r·(gw − x·r²·mean_j(gw⊙x)),  dweight = Σ_rows g⊙x·r (written, not accumulated).
  // An output with data == nullptr is not computed.
  virtual void rms_norm_backward(const TensorView& grad_x, const TensorView& grad_weight, const TensorView& grad_y,
                                 const TensorView& x, const TensorView& weight, const TensorView& rstd) = 0;
  // The residual stream's add and the next RMSNorm in one pass (the pre-norm block's "x + f(x)", then the norm
  // of the sum), rows [R, C]:
  //   h = x + branch,   r = 1/sqrt(mean_j h_j² + eps),   y = h·r·w,   rstd [R] receives r.
  // x, h, weight share one dtype; branch is that dtype or, for float32 x, bfloat16 (widened on load: the output
  // of a bf16 matmul); y likewise (rounded once on store: the input of the next bf16 matmul); rstd has
  // rms_norm's statistic dtype (float32 for bfloat16 x, else x's). The norm reads h as stored (rounded to h's
  // dtype), so the result is bit for bit binary(add, x, branch widened), rms_norm of that, and y's conversion.
  virtual void add_rms_norm(const TensorView& h, const TensorView& y, const TensorView& rstd, const TensorView& x,
                            const TensorView& branch, const TensorView& weight, double eps) = 0;
  // rms_norm_backward whose dx is added onto the gradient already gathered for x (the residual stream's):
  //   grad_x = grad_residual + dx,   grad_weight as rms_norm_backward's (data == nullptr: not computed).
  // grad_residual has x's shape and dtype and may be grad_x itself (same data and strides: updated in place),
  // or be absent (data == nullptr: grad_x = dx). grad_y is x's dtype or, for float32 x, bfloat16 (widened on
  // load: the gradient of a bf16 y). The sum is formed in the compute type (float32 for bfloat16) from dx
  // rounded to it, and rounded once into grad_x: for float32/float64 x bit for bit rms_norm_backward, then
  // binary(add, grad_residual, dx).
  virtual void rms_norm_backward_add(const TensorView& grad_x, const TensorView& grad_weight,
                                     const TensorView& grad_y, const TensorView& x, const TensorView& weight,
                                     const TensorView& rstd, const TensorView& grad_residual) = 0;
  // SwiGLU gate, a, b and out of one shape (any strides): out = silu(a)⊙b.
  virtual void swiglu(const TensorView& out, const TensorView& a, const TensorView& b) = 0;
  //   da = g⊙b⊙σ(a)(1 + a(1 − σ(a))),  db = g⊙silu(a); an output with data == nullptr is not computed.
  virtual void swiglu_backward(const TensorView& grad_a, const TensorView& grad_b, const TensorView& grad_out,
                               const TensorView& a, const TensorView& b) = 0;

  // ---- Fused attention and RoPE kernels (the reference: the compositions in nn/attention.cpp, nn/rope.cpp) ----
  // Rotary embedding of in [..., T, D] (D even, D stride 1) into out (same shape): the pairs (2k, 2k+1)
  // of row t are rotated by the angle whose cos/sin are row positions[t] of the tables [P, D/2]
  // (contiguous, in's dtype); positions [T] Int64/Int32 already checked to be in [0, P).
  // inverse: rotate by the negative angle (the backward of the rotation).
  virtual void rope(const TensorView& out, const TensorView& in, const TensorView& cos, const TensorView& sin,
                    const TensorView& positions, bool inverse) = 0;
  // Causal attention of q [B, H, T, D] with k, v [B, Hkv, Tk, D], Tk ≥ T (H a multiple of Hkv; query
  // head h reads kv head h / (H / Hkv)); every view has D stride 1. Query t is position t + Tk − T
  // (Tk > T: keys cached before it). out [B, H, T, D] = softmax(scale·q·kᵀ with keys j > t + Tk − T
  // hidden)·v; lse [B, H, T] receives each row's log-sum-exp (what backward reads).
  virtual void causal_attention(const TensorView& out, const TensorView& lse, const TensorView& q,
                                const TensorView& k, const TensorView& v, double scale) = 0;
  // causal_attention over the first L keys of k, v [B, Hkv, Tc, D], where L is read from key_count (Int64, one
  // element, on this device) when the kernel runs, not when it is queued — so one captured decode step replays
  // at every position (lm/graph_decoder.h). Needs T ≤ L ≤ Tc: otherwise an error (the GPU: a device error
  // reported at the next check, like a bad index) and out, lse are not written. Query t is position t + L − T.
  // The same values, bit for bit, as causal_attention on k, v narrowed to their first L keys when that call
  // decodes too (L > T, T small: a decode step after a prefill); at L = T causal_attention may take another
  // kernel (the GPU's blocked / tensor-core one for a prompt) and the two agree to rounding only.
  virtual void causal_attention_prefix(const TensorView& out, const TensorView& lse, const TensorView& q,
                                       const TensorView& k, const TensorView& v, const TensorView& key_count,
                                       double scale) = 0;
  // Writes (not accumulates) grad_q, grad_k, grad_v (the shapes of q, k, v, D stride 1) from grad_out.
  // Backward takes Tk == T only (training has no cache).
  virtual void causal_attention_backward(const TensorView& grad_q, const TensorView& grad_k,
                                         const TensorView& grad_v, const TensorView& grad_out, const TensorView& q,
                                         const TensorView& k, const TensorView& v, const TensorView& out,
                                         const TensorView& lse, double scale) = 0;

  // ---- Optimizer kernels ----
  // AdamW update in place, torch.optim.AdamW's order: θ ← θ(1 − lr·λ); m ← β1 m + (1 − β1) g;
  // v ← β2 v + (1 − β2) g²; θ ← θ − lr/bc1 · m / (√v/√bc2 + ε). All four of one shape and dtype.
  virtual void adamw_update(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                            const TensorView& exp_avg_sq, const AdamWStep& step) = 0;
  // Several parameters updated with the same scalars: the same bits as adamw_update on each in turn,
  // which is what this default does. The CUDA backend makes it one launch for all of them.
  virtual void adamw_update_many(const std::vector<AdamWTensors>& tensors, const AdamWStep& step) {
    for (const AdamWTensors& t : tensors) adamw_update(t.param, t.grad, t.exp_avg, t.exp_avg_sq, step);
  }
  // Gradient clipping by the global L2 norm over all of `grads` (contiguous, one dtype), when this backend has
  // kernels that take them all at once (the GPU: three launches for any number of parameters):
  //   norm (0-d Float64) = √(Σ_tensors Σ g²) with g² summed in float64;
  //   when max_norm < norm < ∞: g ← g·(max_norm/(norm + 1e-6)), the factor rounded to g's dtype first.
  // false: nothing was done, and optim::clip_grad_norm_tensor composes it from the functions above.
  virtual bool clip_grad_norm_native(const TensorView& norm, const std::vector<TensorView>& grads, double max_norm) {
    (void)norm, (void)grads, (void)max_norm;
    return false;
  }
  // The next token drawn from one row of logits on this device, with lm::Sampler's rules (lm/sampler.h: the same
  // kept tokens, the same draw order, the same inverse CDF), so that a decode step never sends the [V] row to
  // the host: logits [V] contiguous float32 / bfloat16 / float64; uniform: float64 [1] on this device, the
  // draw's u ∈ [0, 1) (ignored when greedy); writes token (int64 [1]; skipped when its data is null) and
  // result (float64 [2] = {id, status}): status is the row's max logit when it is finite; a NaN or +inf logit
  // gives {its lowest index, its value}, an all −inf row {0, −inf}: nothing is thrown on the device, the reader
  // of `result` reports it. Probabilities are float64 as on the host, but summed in another order: the id is
  // the host's unless u·Σw lies within rounding (~1e-15 relative) of a boundary between two tokens. Nothing
  // is read back (capturable). false: nothing was done (the CPU: its logits are already where lm::Sampler is).
  virtual bool sample_token(const TensorView& token, const TensorView& result, const TensorView& logits,
                            const TensorView& uniform, const TokenSampling& sampling) {
    (void)token, (void)result, (void)logits, (void)uniform, (void)sampling;
    return false;
  }
  // adamw_update_many with the step's scalars read from device memory when the kernel runs, not when it is
  // queued, so a captured step replays with each step's lr and t: `step` is a contiguous Float64 tensor [7]
  // on this device holding {lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2}
  // (AdamWStep's order). The same bits as adamw_update_many. false: nothing was done (no such kernel here,
  // or tensors that are not contiguous float32/float64 of one dtype).
  virtual bool adamw_update_many_from_device(const std::vector<AdamWTensors>& tensors, const TensorView& step) {
    (void)tensors, (void)step;
    return false;
  }

  // ---- capture (kernels/device_graph.h: capture_device_work) ----
  // Starts recording this backend's device work into a graph: until end_capture() kernels and stream copies
  // are recorded, not run, and allocations come from the graph's private pool. false: this backend cannot
  // capture (the CPU: its work runs at once); nothing changed.
  virtual bool begin_capture() { return false; }
  // Ends the capture begun by begin_capture() and returns its graph (throws when none is in progress).
  virtual std::unique_ptr<DeviceGraph> end_capture() {
    throw Error(fmt::format("end_capture: {} has no capture in progress (it cannot capture)", device().str()));
  }
};

// Captures the device work `work` queues on `backend` into a graph; nullptr (and `work` not run) when the
// backend cannot capture (the CPU). If `work` throws, the capture is ended, its partial graph discarded and
// the exception passed on: the backend is usable after.
template <class Work>
std::unique_ptr<DeviceGraph> capture_device_work(Backend& backend, Work&& work) {
  if (!backend.begin_capture()) return nullptr;
  try {
    work();
  } catch (...) {
    try {
      backend.end_capture();
    } catch (...) {  // the first error is the one to report
    }
    throw;
  }
  return backend.end_capture();
}

// The backend of a device; throws tapegrad::Error when this build or machine has none. The CUDA backend is a
// plugin (libtapegrad_cuda.so) opened on the first call for a CUDA device (kernels/plugin_loader.h).
Backend& backend(Device device);
// CUDA devices this process sees: 0 in a build without the CUDA backend, where its plugin cannot be loaded,
// or without a GPU (never throws). Loads the plugin.
int cuda_device_count();
// TF32 tensor cores for float32 matmuls on the CUDA backend (kernels/cuda/cuda_backend.h: set_allow_tf32);
// loads the plugin, throws where there is none.
void set_cuda_allow_tf32(bool allow);

// Threads used by CPU kernels and OpenBLAS (one shared OpenMP pool).
void set_num_threads(int n);
int num_threads();
// The name of the core OpenBLAS chose at load time (e.g. "Cooperlake", "Haswell"), and its
// threading model (0 sequential, 1 pthreads, 2 OpenMP).
const char* blas_core_name();
int blas_parallel_model();
// The file of the OpenBLAS library this process loaded (e.g. .../openblas-openmp/libopenblas.so.0).
std::string blas_library_path();
// One line of advice when OpenBLAS fell back to a generic core on a CPU with AVX2/AVX-512
// (OpenBLAS 0.3.21 does not know newer CPUs), else empty.
std::string blas_advice();

}  // namespace tapegrad::kernels

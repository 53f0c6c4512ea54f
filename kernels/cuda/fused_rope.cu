// fused_rope.cu — CUDA rotary position embedding of in [..., T, D] (D stride 1, other dims any
// strides) into out (same shape), and its inverse (the backward).
//
// Row (…, t) has its pairs (x[2k], x[2k+1]) rotated by the angle whose cos/sin are row pos[t] of
// the tables cos/sin [P, D/2] (contiguous):
//   y[2k]   = x[2k] cos a − x[2k+1] sin a,   y[2k+1] = x[2k] sin a + x[2k+1] cos a
// inverse rotates by −a (sin negated). One thread per pair, grid-stride over rows·D/2 pairs: pair
// p is k = p mod D/2 of row p / (D/2), and t = row mod T; consecutive threads take consecutive
// pairs of a row, so the loads of x and of the table rows are coalesced. A contiguous in/out
// addresses row·D directly, else an Indexer over the dims before D gives both row offsets.
// A position outside [0, P) is reported through the device error record (thrown at the next
// synchronisation) and its pairs are not written.
// bfloat16 (Backend::native_bf16): in, out and the tables are bfloat16 (S), the rotation is computed in
// float32 (C = compute_t<S>) and each output rounded once on the store, as the bf16 bridge does.
#include <type_traits>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/indexer.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// Operands of ix: 0 out, 1 in (over the row shape in.shape[:-1]).
template <class S, class Index, bool Contig, class T = cpu::compute_t<S>>
__global__ void rope_kernel(S* TG_RESTRICT out, const S* TG_RESTRICT in, Indexer<2> ix, const S* TG_RESTRICT cos_table,
                            const S* TG_RESTRICT sin_table, const Index* TG_RESTRICT positions,
                            int64_t position_stride, int64_t P, int64_t Tn, int64_t half, int64_t pairs, T sign,
                            DeviceErrorRecord* errors) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = p % half, row = p / half, t = row % Tn;
    const int64_t pos = static_cast<int64_t>(positions[t * position_stride]);
    if (pos < 0 || pos >= P) {
      report_bad_index(errors, DeviceErrorCode::RopePosition, pos, P, t);
      continue;
    }
    int64_t off[2] = {row * 2 * half, row * 2 * half};
    if constexpr (!Contig) ix.offsets(row, off);
    const T x0 = T(in[off[1] + 2 * k]), x1 = T(in[off[1] + 2 * k + 1]);
    const T c = T(cos_table[pos * half + k]), s = sign * T(sin_table[pos * half + k]);
    out[off[0] + 2 * k] = S(x0 * c - x1 * s);
    out[off[0] + 2 * k + 1] = S(x0 * s + x1 * c);
  }
}

}  // namespace

void CudaBackend::rope(const TensorView& out, const TensorView& in, const TensorView& cos, const TensorView& sin,
                       const TensorView& positions, bool inverse) {
  const char* op = "rope";
  const int nd = in.ndim();
  TG_CHECK(nd >= 2 && in.shape[nd - 1] % 2 == 0, "{}: in must be [..., T, D] with D even, got {}", op, in.shape);
  TG_CHECK(out.shape == in.shape && out.dtype == in.dtype, "{}: out {} {} must match in {} {}", op, out.dtype,
           out.shape, in.dtype, in.shape);
  const int64_t D = in.shape[nd - 1], half = D / 2, Tn = in.shape[nd - 2];
  TG_CHECK(D == 0 || (in.strides[nd - 1] == 1 && out.strides[nd - 1] == 1), "{}: in and out need D stride 1", op);
  TG_CHECK(cos.ndim() == 2 && cos.shape[1] == half && sin.shape == cos.shape && cos.dtype == in.dtype &&
               sin.dtype == in.dtype && cos.is_contiguous() && sin.is_contiguous(),
           "{}: cos {} and sin {} must be contiguous {} [P, D/2] = [P, {}]", op, cos.shape, sin.shape, in.dtype, half);
  TG_CHECK((positions.dtype == DType::Int64 || positions.dtype == DType::Int32) && positions.ndim() == 1 &&
               positions.shape[0] == Tn,
           "{}: positions must be int64/int32 [T] = [{}], got {} {}", op, Tn, positions.dtype, positions.shape);
  cpu::dispatch_floating_storage(in.dtype, op, [&](auto tag) {
    using S = decltype(tag);
    using T = cpu::compute_t<S>;
    const int64_t rows = half == 0 ? 0 : in.numel() / D;
    const int64_t pairs = rows * half;
    if (pairs == 0) return;
    Shape row_shape = in.shape;
    row_shape.resize(nd - 1);
    TensorView out_rows = out, in_rows = in;  // the views without their D dim
    out_rows.shape = in_rows.shape = row_shape;
    out_rows.strides.resize(nd - 1);
    in_rows.strides.resize(nd - 1);
    const Indexer<2> ix = make_indexer<2>(row_shape, {&out_rows, &in_rows});
    // Rows packed at stride D in both views: row·D is the offset.
    bool contig = true;
    int64_t packed = D;
    for (int d = nd - 2; d >= 0; --d) {
      if (in.shape[d] != 1) contig &= in.strides[d] == packed && out.strides[d] == packed;
      packed *= in.shape[d];
    }
    const T sign = inverse ? T(-1) : T(1);
    const unsigned blocks = blocks_for(pairs, kThreads);
    auto go = [&](auto index_tag, auto contiguous) {
      using Index = decltype(index_tag);
      constexpr bool C = decltype(contiguous)::value;
      launch(rope_kernel<S, Index, C>, dim3(blocks), dim3(kThreads), 0, static_cast<S*>(out.data),
             static_cast<const S*>(in.data), ix, static_cast<const S*>(cos.data), static_cast<const S*>(sin.data),
             static_cast<const Index*>(positions.data), positions.strides[0], cos.shape[0], Tn, half, pairs, sign,
             device_error_record());
    };
    if (positions.dtype == DType::Int64) {
      if (contig) go(int64_t{}, std::true_type{});
      else go(int64_t{}, std::false_type{});
    } else {
      if (contig) go(int32_t{}, std::true_type{});
      else go(int32_t{}, std::false_type{});
    }
  });
}

}  // namespace tapegrad::kernels::cuda

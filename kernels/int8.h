// int8.h — weight-only int8 for inference (llama.cpp's Q8_0, llama2.c's runq.c): a float32 matrix
// W [rows, cols] (a Linear's weight [out, in], an embedding [V, C]) stored as int8 values in groups of
// `group` consecutive columns, each group with one float32 scale:
//
//   scale = max|w| / 127 over the group        q = round_half_even(w / scale) ∈ [−127, 127]
//   w ≈ q · scale                              (a group of zeros has scale 0 and q = 0)
//
// Groups run along the input dimension (cols), row by row; when `group` does not divide cols the
// last group of each row is shorter. Everything here is CPU code (the kernels live in
// kernels/cpu/int8_*.cpp; nothing of autograd), used by autograd/int8_ops.h for Tensors.
//
// The product y [M, rows] = x [M, cols] · Wᵀ is computed one of two ways (Int8Activations):
//   Quantized (the default): each row of x is quantized the same way, per group, and every group's
//     dot product is an exact int32 sum of int8 × int8 products, then scaled:
//       y[m, n] = Σ_g  sx[m, g] · sw[n, g] · Σ_{k ∈ g} qx[m, k] · qw[n, k]
//     (runq.c's scheme; AVX-512 VNNI's vpdpbusd does 64 such products in one instruction.)
//   Float: x stays float32 and W is widened group by group:
//       y[m, n] = Σ_g  sw[n, g] · Σ_{k ∈ g} x[m, k] · qw[n, k]
// Both read the weights once per call (one byte per value); docs/quantization.md compares them.
#pragma once
#include <cstdint>
#include <vector>

namespace tapegrad::kernels {

struct Int8Matrix {
  int64_t rows = 0, cols = 0, group = 0;
  std::vector<int8_t> q;      // rows · cols, row-major
  std::vector<float> scales;  // rows · groups_per_row(), row-major
  int64_t groups_per_row() const { return group > 0 ? (cols + group - 1) / group : 0; }
  // Bytes read by one product: the values and the scales.
  int64_t bytes() const { return int64_t(q.size()) + 4 * int64_t(scales.size()); }
};

// Quantizes w [rows, cols] (row-major float32) in groups of `group` along cols (group ≥ 1).
Int8Matrix quantize_int8(const float* w, int64_t rows, int64_t cols, int64_t group);
// out [rows, cols] = q · scale.
void dequantize_int8(const Int8Matrix& m, float* out);
// One row of values, dequantized: out [cols] (an embedding lookup).
void dequantize_int8_row(const Int8Matrix& m, int64_t row, float* out);
// Checks the sizes of q and scales against rows, cols and group; throws tapegrad::Error naming `what`.
void check_int8_matrix(const Int8Matrix& m, const char* what);

enum class Int8Activations : uint8_t { Quantized, Float };
// Which instructions run the products. Auto picks the best this CPU has and the group size allows: the
// SIMD paths take groups that are a multiple of their step (AVX2 32 bytes, AVX-512 64) or a multiple of 4
// dividing it (4, 8, 16; 32 on AVX-512: runq.c's groups of 4); other groups run the portable loop.
enum class Int8Path : uint8_t { Auto, Portable, Avx2, Avx512, Avx512Vnni };
const char* int8_path_name(Int8Path p);  // "portable", "avx2", "avx512", "avx512-vnni"
bool int8_path_supported(Int8Path p);    // the CPU (and the compiler) can run it
// The path Auto takes for a matrix of this group size on this CPU.
Int8Path int8_resolve_path(Int8Path p, int64_t group);

// The defaults for int8_linear: TAPEGRAD_INT8_ACTIVATIONS=quantized|float and
// TAPEGRAD_INT8_PATH=auto|portable|avx2|avx512|avx512-vnni (read once; a bad value throws).
Int8Activations int8_default_activations();
Int8Path int8_default_path();

// y [m, w.rows] = x [m, w.cols] · Wᵀ, all row-major and contiguous. Output rows are split across the
// OpenMP threads when there is enough work. Throws for a path this CPU cannot run.
void int8_matmul(const float* x, int64_t m, const Int8Matrix& w, float* y,
                 Int8Activations activations = Int8Activations::Quantized, Int8Path path = Int8Path::Auto);

}  // namespace tapegrad::kernels

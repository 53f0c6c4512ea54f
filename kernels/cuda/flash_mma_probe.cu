// flash_mma_probe.cu — the kernels behind flash_mma_probe.h: one block of one warp running mma.h's
// mma_bf16_16816 / ldmatrix_x4(_trans) on data copied from the host (test support for the fragment layouts).
#include "kernels/cuda/flash_mma_probe.h"

#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/mma.h"
#include "kernels/cuda/runtime.h"

namespace tapegrad::kernels::cuda {
namespace {

// Shared tiles, 16-byte aligned as ldmatrix's row addresses must be.
struct alignas(16) ProductTiles {
  uint16_t a[16 * 16];
  uint16_t b[16 * 8];  // b[k][n] (trans load) or bᵀ[n][k] (plain load)
};
struct alignas(16) MatrixTile {
  uint16_t m[32 * 8];
};

__device__ inline uint32_t word_of(const uint16_t* p, int i0, int i1) { return uint32_t(p[i0]) | (uint32_t(p[i1]) << 16); }

__global__ void mma_probe_kernel(const uint16_t* a, const uint16_t* b, const float* c, float* d, int load) {
  __shared__ ProductTiles tiles;
  uint16_t* a_tile = tiles.a;
  uint16_t* b_tile = tiles.b;
  const int lane = int(threadIdx.x), g = lane / 4, t = lane % 4;
  for (int i = lane; i < 256; i += 32) a_tile[i] = a[i];
  for (int i = lane; i < 128; i += 32) {
    const int k = i / 8, n = i % 8;
    if (load == int(MmaProbeLoad::Ldmatrix))
      b_tile[n * 16 + k] = b[i];
    else
      b_tile[i] = b[i];
  }
  __syncthreads();
  uint32_t af[4], bf[2];
  if (load == int(MmaProbeLoad::Direct)) {
    af[0] = word_of(a, g * 16 + 2 * t, g * 16 + 2 * t + 1);
    af[1] = word_of(a, (g + 8) * 16 + 2 * t, (g + 8) * 16 + 2 * t + 1);
    af[2] = word_of(a, g * 16 + 2 * t + 8, g * 16 + 2 * t + 9);
    af[3] = word_of(a, (g + 8) * 16 + 2 * t + 8, (g + 8) * 16 + 2 * t + 9);
    bf[0] = word_of(b, (2 * t) * 8 + g, (2 * t + 1) * 8 + g);
    bf[1] = word_of(b, (2 * t + 8) * 8 + g, (2 * t + 9) * 8 + g);
  } else {
    mma::ldmatrix_x4(af, reinterpret_cast<const bfloat16*>(a_tile + (lane % 16) * 16 + 8 * (lane / 16)));
    uint32_t r[4];
    if (load == int(MmaProbeLoad::Ldmatrix))  // bᵀ [8][16]: matrices (k 0–7), (k 8–15), then the same again
      mma::ldmatrix_x4(r, reinterpret_cast<const bfloat16*>(b_tile + (lane % 8) * 16 + 8 * ((lane / 8) % 2)));
    else  // b [16][8]: matrices (k 0–7), (k 8–15), then the same again
      mma::ldmatrix_x4_trans(r, reinterpret_cast<const bfloat16*>(b_tile + (lane % 16) * 8));
    bf[0] = r[0], bf[1] = r[1];
  }
  float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1]};
  mma::mma_bf16_16816(acc, af, bf);
  d[g * 8 + 2 * t] = acc[0], d[g * 8 + 2 * t + 1] = acc[1];
  d[(g + 8) * 8 + 2 * t] = acc[2], d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}

__global__ void ldmatrix_probe_kernel(const uint16_t* m, int trans, uint32_t* words) {
  __shared__ MatrixTile matrices;
  uint16_t* tile = matrices.m;
  const int lane = int(threadIdx.x);
  for (int i = lane; i < 256; i += 32) tile[i] = m[i];
  __syncthreads();
  uint32_t r[4];
  const bfloat16* row = reinterpret_cast<const bfloat16*>(tile + lane * 8);
  if (trans)
    mma::ldmatrix_x4_trans(r, row);
  else
    mma::ldmatrix_x4(r, row);
  for (int i = 0; i < 4; ++i) words[lane * 4 + i] = r[i];
}

// A device copy of n host values (freed with the backend's allocator).
template <class T>
class DeviceCopy {
 public:
  DeviceCopy(CudaBackend& be, const T* host, size_t n) : buffer_(be, n * sizeof(T)) {
    if (host != nullptr) be.copy_from_host(buffer_.as<T>(), host, n * sizeof(T));
  }
  T* get() const { return buffer_.as<T>(); }

 private:
  ScratchBuffer buffer_;
};

}  // namespace

void mma_probe_product(const uint16_t* a, const uint16_t* b, const float* c, float* d, MmaProbeLoad load) {
  CudaBackend& be = cuda_backend(0);
  const DeviceCopy<uint16_t> da(be, a, 256), db(be, b, 128);
  const DeviceCopy<float> dc(be, c, 128), dd(be, nullptr, 128);
  launch(&mma_probe_kernel, dim3(1), dim3(32), 0, static_cast<const uint16_t*>(da.get()),
         static_cast<const uint16_t*>(db.get()), static_cast<const float*>(dc.get()), dd.get(), int(load));
  be.copy_to_host(d, dd.get(), 128 * sizeof(float));
}

void mma_probe_ldmatrix(const uint16_t* m, bool trans, uint32_t* words) {
  CudaBackend& be = cuda_backend(0);
  const DeviceCopy<uint16_t> dm(be, m, 256);
  const DeviceCopy<uint32_t> dw(be, nullptr, 128);
  launch(&ldmatrix_probe_kernel, dim3(1), dim3(32), 0, static_cast<const uint16_t*>(dm.get()), trans ? 1 : 0,
         dw.get());
  be.copy_to_host(words, dw.get(), 128 * sizeof(uint32_t));
}

}  // namespace tapegrad::kernels::cuda

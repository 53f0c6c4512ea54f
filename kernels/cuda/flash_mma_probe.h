// flash_mma_probe.h — one warp of the tensor-core primitives of kernels/cuda/mma.h run on the device on host
// data, so tests/cuda/test_cuda_mma.cpp can check their fragment layouts against plain loops (on the emulated
// device, and on a real GPU through scripts/gpu_check.sh). Test support only; no kernel of the backend uses it.
#pragma once
#include <cstdint>

namespace tapegrad::kernels::cuda {

// How mma_probe_product gets its fragments:
//   Direct:      each lane reads its A and B elements from memory per the PTX layouts (tests mma alone);
//   Ldmatrix:    A by ldmatrix_x4 from a [16][16] shared tile, B by ldmatrix_x4 from Bᵀ stored [8][16]
//                (the S = Q·Kᵀ pattern of the attention kernels);
//   LdmatrixTrans: A as above, B by ldmatrix_x4_trans from B stored [16][8] (the O += P·V pattern).
enum class MmaProbeLoad { Direct, Ldmatrix, LdmatrixTrans };

// d [16×8] = c + a·b with a [16×16] and b [16×8] row-major bfloat16 bits (b[k][n]), c and d row-major float32.
void mma_probe_product(const uint16_t* a, const uint16_t* b, const float* c, float* d, MmaProbeLoad load);

// words [32 lanes][4] of ldmatrix_x4 (trans or not) over m [32 rows][8] bfloat16 bits, lane ℓ addressing row ℓ
// (rows 8i .. 8i+7 are matrix i).
void mma_probe_ldmatrix(const uint16_t* m, bool trans, uint32_t* words);

}  // namespace tapegrad::kernels::cuda

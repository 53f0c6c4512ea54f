// newton_schulz.h — the orthogonalisation at the heart of Muon (optim/muon.h): for a matrix G [m, n],
// an approximation of U·Vᵀ where G = U·S·Vᵀ is its (thin) singular value decomposition, i.e. G with
// every singular value replaced by (about) 1. Exactly torch.optim.Muon's _zeropower_via_newtonschulz:
//
//   X ← G (or Gᵀ when m > n, so that the Gram matrix X·Xᵀ is the smaller, min(m, n)²)
//   X ← X / max(‖X‖_F, ε)                 the Frobenius norm bounds the spectral norm: every σ ≤ 1
//   repeat `steps` times (the quintic iteration, coefficients (a, b, c)):
//     A ← X·Xᵀ                            [k, k], k = min(m, n)
//     B ← b·A + c·A·A
//     X ← a·X + B·X                       = (a + b·XXᵀ + c·(XXᵀ)²)·X
//   return X (transposed back when m > n)
//
// Why it works: each step maps every singular value σ of X to p(σ) = a·σ + b·σ³ + c·σ⁵ and keeps the
// singular vectors. With (a, b, c) = (3.4445, −4.7750, 2.0315) p has a steep slope at 0 (a = 3.4 pulls
// small σ up fast) and after 5 steps every σ in (0, 1] lands in roughly [0.7, 1.2] — not exactly 1
// (the coefficients trade precision for speed), which is all Muon needs.
//
// The Gram form computes the same X with the loop on [k, k] matrices alone. Each step multiplies X by
// P = a·I + b·A + c·A², a polynomial in A = X·Xᵀ; so X_j = Q_j·X₀ with Q_j a polynomial in A₀ = X₀·X₀ᵀ, and
// A_{j+1} = P_j·A_j·P_j (polynomials in A₀ commute):
//   A ← X₀·X₀ᵀ,  Q ← I
//   repeat: B ← b·A + c·A·A;  Q ← a·Q + B·Q  (= P·Q);  A ← P·(P·A)  (not after the last step)
//   X ← Q·X₀
// Multiply-adds: 2k²n + (4s − 3)k³ against the direct s·(2k²n + k³): fewer when n > 1.5·k (the race's SwiGLU
// matrices, k = 128, n = 384: 23k³ against 35k³). Equal in exact arithmetic (float64: within 1e-12 of the direct
// form, tested). In float32 a singular value σ of X₀ below ~√ε·σ_max ≈ 3e-4·σ_max is resolved less finely (its σ²
// sits in A₀ at float32's resolution), which moves that direction's output by about 1e-3 of the result's scale:
// noise far below the update's, in directions the gradient barely has. Not used in bfloat16.
//
// It runs on whatever backend G lives on, through matmul: on a GPU the GEMMs are cuBLAS's. `dtype`
// chooses what it computes in: torch.optim.Muon always computes in bfloat16; tapegrad's Muon computes in
// the parameter's dtype unless asked (MuonOptions::ns_dtype), because on the CPU bf16 is no faster.
#pragma once
#include <array>
#include <optional>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad::optim {

inline constexpr std::array<double, 3> kNewtonSchulzCoefficients = {3.4445, -4.7750, 2.0315};
inline constexpr int kNewtonSchulzSteps = 5;
inline constexpr double kNewtonSchulzEps = 1e-7;

// Direct: torch's iteration, always. Gram: the Gram form, always. Auto: the Gram form where it is cheaper
// (n > 1.5·k for the work shape [k, n]) and the work dtype is float32 or float64.
enum class NewtonSchulzForm { Direct, Gram, Auto };

// G: a 2-D floating tensor. Returns a new tensor of G's shape, in `dtype` (unset: G's dtype). Not on
// the tape (runs under NoGradGuard). tapegrad::Error for a non-2-D G or steps outside [0, 100).
Tensor newton_schulz_orthogonalize(const Tensor& G,
                                   const std::array<double, 3>& coefficients = kNewtonSchulzCoefficients,
                                   int steps = kNewtonSchulzSteps, double eps = kNewtonSchulzEps,
                                   std::optional<DType> dtype = std::nullopt,
                                   NewtonSchulzForm form = NewtonSchulzForm::Direct);

// The same for many matrices at once, each on its own (its own norm, its own iteration): the matrices whose
// work shapes ([k, n] after the transpose of a tall one), dtype and device agree are stacked [count, k, n] and
// iterated as one batched product per step — 3 batched GEMMs per step for a whole model's attention
// projections instead of 3 per matrix, which the CPU backend spreads over its threads one matrix each
// (kernels/cpu/matmul.cpp) and a GPU runs as one launch. out[i] is newton_schulz_orthogonalize(Gs[i]) up to
// the rounding of another GEMM schedule.
std::vector<Tensor> newton_schulz_orthogonalize_many(
    const std::vector<Tensor>& Gs, const std::array<double, 3>& coefficients = kNewtonSchulzCoefficients,
    int steps = kNewtonSchulzSteps, double eps = kNewtonSchulzEps, std::optional<DType> dtype = std::nullopt,
    NewtonSchulzForm form = NewtonSchulzForm::Direct);

}  // namespace tapegrad::optim

// muon.h — Muon (Keller Jordan 2024, "Muon: an optimizer for hidden layers in neural networks"), behaving
// exactly like torch.optim.Muon. For a 2-D weight θ [A, B] (A = fan-out, B = fan-in) with gradient g:
//   buf ← lerp(buf, g, 1 − μ) = μ·buf + (1 − μ)·g       momentum (an exponential average of gradients)
//   u   ← lerp(g, buf, μ)     = (1 − μ)·g + μ·buf       with Nesterov (default); u ← buf without
//   O   ← NS(u)                                         u with its singular values set to ~1 (newton_schulz.h)
//   θ   ← θ·(1 − lr·λ)                                  decoupled weight decay (λ = weight_decay), with the
//                                                       UNADJUSTED lr, as torch
//   θ   ← θ − lr'·O,  lr' = lr·adjust(A, B):
//         original         √max(1, A/B)                 (Keller Jordan's; torch's default)
//         match_rms_adamw  0.2·√max(A, B)               (Moonshot: the update's RMS then matches AdamW's, so
//                                                        AdamW's lr and weight decay carry over)
//         spectral_unclamped √(A/B)                     (Bernstein's)
//
// Why orthogonalise: a gradient of a weight matrix is typically dominated by a few directions (a low
// "effective rank"); a step along it grows those and barely moves the rest. O = U·Vᵀ of u = U·S·Vᵀ keeps
// the directions but gives each the same size, so the rare directions learn as fast as the common ones —
// steepest descent under the spectral norm (docs/training.md, "Muon").
//
// Only for 2-D parameters (the weight matrices inside the blocks); embeddings, the LM head and 1-D gains go
// to AdamW — optim/lm_optimizer.h builds the pair as one optimizer.
//
//   Muon opt(matrices, MuonOptions(0.02));
// Defaults (torch's): lr 1e-3, weight_decay 0.1, momentum 0.95, nesterov, NS coefficients (3.4445, −4.7750,
// 2.0315), 5 steps, ε 1e-7, adjust "original". State per parameter: "momentum_buffer" (the parameter's shape
// and dtype), created as zeros on its first update.
// One difference, on purpose: torch computes the Newton–Schulz iteration in bfloat16 always; here it runs in
// the parameter's dtype unless ns_dtype says otherwise (on the CPU bf16 is not faster — kernels/bf16_bridge.h
// widens it to float32 — and float64 lets the test hold torch's float64 iteration to 1e-10). And for a wide
// matrix (n > 1.5·k) in float32/float64 the iteration runs in its Gram form (ns_form Auto, newton_schulz.h):
// the same values in exact arithmetic with fewer multiply-adds.
#pragma once
#include <array>
#include <optional>
#include <string>

#include "optim/newton_schulz.h"
#include "optim/optimizer.h"

namespace tapegrad::optim {

enum class MuonLrAdjust { Original, MatchRmsAdamW, SpectralUnclamped };
// "original", "match_rms_adamw", "spectral_unclamped" (torch's names); anything else: tapegrad::Error.
MuonLrAdjust parse_muon_lr_adjust(const std::string& name);
const char* muon_lr_adjust_name(MuonLrAdjust adjust);
// lr' = lr·adjust(A, B) for a weight of shape [A, B] (the table above).
double muon_adjusted_lr(double lr, MuonLrAdjust adjust, int64_t rows, int64_t cols);

struct MuonOptions {
  explicit MuonOptions(double lr = 1e-3) : lr_(lr) {}
  MuonOptions& lr(double v) { lr_ = v; return *this; }
  MuonOptions& weight_decay(double v) { weight_decay_ = v; return *this; }
  MuonOptions& momentum(double v) { momentum_ = v; return *this; }
  MuonOptions& nesterov(bool v) { nesterov_ = v; return *this; }
  MuonOptions& ns_coefficients(std::array<double, 3> v) { ns_coefficients_ = v; return *this; }
  MuonOptions& ns_steps(int v) { ns_steps_ = v; return *this; }
  MuonOptions& eps(double v) { eps_ = v; return *this; }
  MuonOptions& adjust_lr(MuonLrAdjust v) { adjust_lr_ = v; return *this; }
  MuonOptions& ns_dtype(std::optional<DType> v) { ns_dtype_ = v; return *this; }
  MuonOptions& ns_form(NewtonSchulzForm v) { ns_form_ = v; return *this; }
  double lr_;
  double weight_decay_ = 0.1;
  double momentum_ = 0.95;
  bool nesterov_ = true;
  std::array<double, 3> ns_coefficients_ = kNewtonSchulzCoefficients;
  int ns_steps_ = kNewtonSchulzSteps;
  double eps_ = kNewtonSchulzEps;
  MuonLrAdjust adjust_lr_ = MuonLrAdjust::Original;
  std::optional<DType> ns_dtype_;  // unset: the parameter's dtype (torch: always bfloat16)
  NewtonSchulzForm ns_form_ = NewtonSchulzForm::Auto;
};

class Muon final : public Optimizer {
 public:
  explicit Muon(std::vector<Tensor> params, MuonOptions options = MuonOptions());
  // Groups' unset lr / weight decay take options' values; the rest is shared by all groups. Every
  // parameter must be 2-D (tapegrad::Error naming it otherwise).
  Muon(std::vector<ParamGroup> groups, MuonOptions options = MuonOptions());

  void step() override;
  const MuonOptions& options() const { return options_; }
  // Checkpoints require these to match on resume (the NS dtype is not among them: it changes rounding only).
  std::map<std::string, double> fixed_hyperparameters() const override;

 protected:
  std::vector<std::string> state_buffers() const override { return {"momentum_buffer"}; }
  void validate_state(size_t i, const Tensor& param, const std::map<std::string, Tensor>& state) const override;

 private:
  MuonOptions options_;
};

}  // namespace tapegrad::optim

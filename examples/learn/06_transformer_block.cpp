// 06_transformer_block.cpp — the learning path, chapter 6 (docs/learn/06_transformer_block.md):
// the backward passes of a Transformer block written out by hand and checked against the library.
//
//   06_transformer_block            RMSNorm's and causal attention's backward, by hand on small float64
//                                   tensors, against backward() through nn::RMSNorm, the fused
//                                   causal_attention op and nn::scaled_dot_product_attention.
//   06_transformer_block --golden   a whole TransformerLM's loss and every parameter gradient against
//                                   the float64 golden data PyTorch computed (../shared/data/reference).
//
// Exercise: delete the body of rmsnorm_backward_by_hand below and write it again from the chapter's
// derivation. The program prints MATCH when your gradients equal the library's (and exits 1 otherwise).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "autograd/io/safetensors.h"
#include "autograd/tapegrad.h"
#include "nn/attention.h"
#include "nn/loss.h"
#include "nn/rmsnorm.h"
#include "nn/transformer_lm.h"

using namespace tapegrad;

namespace {

// Largest |a_i − b_i| of two equally long lists.
double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

const char* verdict(double diff) { return diff <= 1e-12 ? "MATCH" : "MISMATCH"; }

// ============================== EXERCISE: write RMSNorm's backward ==============================
// Forward, per row of C numbers:  r = 1/sqrt(mean(x²) + eps),  y_i = x_i · r · g_i.
// Given dy = dL/dy for every row, return dx = dL/dx ([rows, C], row-major) and dg = dL/dg ([C]).
// Delete the body, derive it with the chapter's five steps (docs/learn/06_transformer_block.md, "RMSNorm,
// step by step"), write it again and run the program: MATCH or MISMATCH.
struct RmsNormGrads {
  std::vector<double> dx, dg;
};

RmsNormGrads rmsnorm_backward_by_hand(const std::vector<double>& x, const std::vector<double>& g,
                                      const std::vector<double>& dy, int64_t rows, int64_t C, double eps) {
  RmsNormGrads out{std::vector<double>(x.size(), 0.0), std::vector<double>(g.size(), 0.0)};
  for (int64_t row = 0; row < rows; ++row) {
    const double* xr = &x[row * C];
    const double* dyr = &dy[row * C];
    double mean_sq = 0, mean_xgdy = 0;
    for (int64_t i = 0; i < C; ++i) {
      mean_sq += xr[i] * xr[i] / C;
      mean_xgdy += xr[i] * g[i] * dyr[i] / C;
    }
    const double r = 1.0 / std::sqrt(mean_sq + eps);
    for (int64_t i = 0; i < C; ++i) {
      out.dx[row * C + i] = r * g[i] * dyr[i] - xr[i] * r * r * r * mean_xgdy;
      out.dg[i] += dyr[i] * xr[i] * r;
    }
  }
  return out;
}
// ================================================================================================

int check_rmsnorm() {
  const int64_t B = 2, T = 3, C = 4;
  const double eps = 1e-5;
  Generator gen(6);
  Tensor x = randn({B, T, C}, kFloat64, &gen).requires_grad_();
  Tensor dy = randn({B, T, C}, kFloat64, &gen);  // the gradient arriving from above
  nn::RMSNorm norm(C, eps, kFloat64);
  {
    NoGradGuard no_grad;  // parameters are changed in place only outside the tape
    norm.weight.copy_(randn({C}, kFloat64, &gen));
  }
  // Library: L = Σ y ⊙ dy has dL/dy = dy, so backward() delivers dL/dx and dL/dg for this dy.
  Tensor y = norm(x);
  sum(y * dy).backward();

  RmsNormGrads hand = rmsnorm_backward_by_hand(x.to_vector<double>(), norm.weight.to_vector<double>(),
                                               dy.to_vector<double>(), B * T, C, eps);
  const double ddx = max_abs_diff(hand.dx, x.grad().to_vector<double>());
  const double ddg = max_abs_diff(hand.dg, norm.weight.grad().to_vector<double>());
  std::printf("RMSNorm, x [B=%lld, T=%lld, C=%lld], float64\n", (long long)B, (long long)T, (long long)C);
  std::printf("  dx[0, 0, :] by hand  %10.6f %10.6f %10.6f %10.6f\n", hand.dx[0], hand.dx[1], hand.dx[2], hand.dx[3]);
  const std::vector<double> lib_dx = x.grad().to_vector<double>();
  std::printf("  dx[0, 0, :] library  %10.6f %10.6f %10.6f %10.6f\n", lib_dx[0], lib_dx[1], lib_dx[2], lib_dx[3]);
  std::printf("  max |dx by hand - library| = %.1e\n", ddx);
  std::printf("  max |dg by hand - library| = %.1e\n", ddg);
  std::printf("  rmsnorm_backward_by_hand: %s\n", verdict(std::max(ddx, ddg)));
  return std::max(ddx, ddg) <= 1e-12 ? 0 : 1;
}

// Causal attention for ONE head, by hand. q, k, v are [T, D] row-major.
//   S = Q Kᵀ · scale   (S_ij = −∞ for j > i: a query sees only itself and earlier keys)
//   P = softmax(S) per row,  O = P V
// Backward, given dO:
//   dV = Pᵀ dO,  dP = dO Vᵀ,  dS = P ⊙ (dP − rowsum(dP ⊙ P)),  dQ = dS K · scale,  dK = dSᵀ Q · scale
struct AttentionByHand {
  std::vector<double> p, o, dq, dk, dv;  // P [T, T], O [T, D], dQ, dK, dV [T, D]
};

AttentionByHand attention_by_hand(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const std::vector<double>& d_o, int64_t T, int64_t D) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const auto at = [](int64_t i, int64_t j, int64_t cols) { return static_cast<size_t>(i * cols + j); };
  AttentionByHand a{std::vector<double>(T * T, 0.0), std::vector<double>(T * D, 0.0), std::vector<double>(T * D, 0.0),
                    std::vector<double>(T * D, 0.0), std::vector<double>(T * D, 0.0)};
  // Forward: row i of P is a softmax over keys 0..i (the masked ones have exp(−∞) = 0).
  for (int64_t i = 0; i < T; ++i) {
    std::vector<double> s(i + 1);
    for (int64_t j = 0; j <= i; ++j) {
      for (int64_t d = 0; d < D; ++d) s[j] += q[at(i, d, D)] * k[at(j, d, D)];
      s[j] *= scale;
    }
    const double m = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (int64_t j = 0; j <= i; ++j) z += std::exp(s[j] - m);
    for (int64_t j = 0; j <= i; ++j) a.p[at(i, j, T)] = std::exp(s[j] - m) / z;
    for (int64_t j = 0; j <= i; ++j)
      for (int64_t d = 0; d < D; ++d) a.o[at(i, d, D)] += a.p[at(i, j, T)] * v[at(j, d, D)];
  }
  // Backward.
  std::vector<double> dp(T * T, 0.0), ds(T * T, 0.0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      for (int64_t d = 0; d < D; ++d) {
        a.dv[at(j, d, D)] += a.p[at(i, j, T)] * d_o[at(i, d, D)];  // dV = Pᵀ dO
        dp[at(i, j, T)] += d_o[at(i, d, D)] * v[at(j, d, D)];      // dP = dO Vᵀ
      }
  for (int64_t i = 0; i < T; ++i) {
    double row = 0;  // rowsum(dP ⊙ P)
    for (int64_t j = 0; j < T; ++j) row += dp[at(i, j, T)] * a.p[at(i, j, T)];
    for (int64_t j = 0; j < T; ++j) ds[at(i, j, T)] = a.p[at(i, j, T)] * (dp[at(i, j, T)] - row);
  }
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      for (int64_t d = 0; d < D; ++d) {
        a.dq[at(i, d, D)] += ds[at(i, j, T)] * k[at(j, d, D)] * scale;  // dQ = dS K · scale
        a.dk[at(j, d, D)] += ds[at(i, j, T)] * q[at(i, d, D)] * scale;  // dK = dSᵀ Q · scale
      }
  return a;
}

int check_attention() {
  const int64_t B = 1, H = 2, T = 4, D = 3;
  Generator gen(7);
  Tensor q = randn({B, H, T, D}, kFloat64, &gen).requires_grad_();
  Tensor k = randn({B, H, T, D}, kFloat64, &gen).requires_grad_();
  Tensor v = randn({B, H, T, D}, kFloat64, &gen).requires_grad_();
  Tensor d_o = randn({B, H, T, D}, kFloat64, &gen);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));

  // Two library paths: the fused kernel (what TransformerLM runs) and the composition
  // matmul → where(mask) → softmax → matmul (nn::scaled_dot_product_attention).
  Tensor o_fused = causal_attention(q, k, v, scale);
  sum(o_fused * d_o).backward();
  const std::vector<double> fused_dq = q.grad().to_vector<double>(), fused_dk = k.grad().to_vector<double>(),
                            fused_dv = v.grad().to_vector<double>();
  q.zero_grad(), k.zero_grad(), v.zero_grad();
  Tensor o_comp = nn::scaled_dot_product_attention(q, k, v, nn::causal_mask(T));
  sum(o_comp * d_o).backward();

  // By hand, one head at a time ([T, D] slices of the [B, H, T, D] tensors).
  const auto head = [&](const Tensor& t, int64_t h) { return t.select(0, 0).select(0, h).contiguous().to_vector<double>(); };
  std::vector<double> hand_o, hand_dq, hand_dk, hand_dv, p0;
  for (int64_t h = 0; h < H; ++h) {
    AttentionByHand a = attention_by_hand(head(q, h), head(k, h), head(v, h), head(d_o, h), T, D);
    if (h == 0) p0 = a.p;
    hand_o.insert(hand_o.end(), a.o.begin(), a.o.end());
    hand_dq.insert(hand_dq.end(), a.dq.begin(), a.dq.end());
    hand_dk.insert(hand_dk.end(), a.dk.begin(), a.dk.end());
    hand_dv.insert(hand_dv.end(), a.dv.begin(), a.dv.end());
  }
  std::printf("\ncausal attention, q, k, v [B=%lld, H=%lld, T=%lld, D=%lld], float64\n", (long long)B, (long long)H,
              (long long)T, (long long)D);
  std::printf("  P = softmax(Q K^T / sqrt(D), causal) of head 0, by hand:\n");
  for (int64_t i = 0; i < T; ++i) {
    std::printf("   ");
    for (int64_t j = 0; j < T; ++j) std::printf(" %.4f", p0[i * T + j]);
    std::printf("\n");
  }
  // to_vector reads in logical [B, H, T, D] order, whatever the memory layout.
  const double worst_fused = std::max({max_abs_diff(hand_o, o_fused.to_vector<double>()),
                                       max_abs_diff(hand_dq, fused_dq), max_abs_diff(hand_dk, fused_dk),
                                       max_abs_diff(hand_dv, fused_dv)});
  const double worst_comp = std::max({max_abs_diff(hand_o, o_comp.to_vector<double>()),
                                      max_abs_diff(hand_dq, q.grad().to_vector<double>()),
                                      max_abs_diff(hand_dk, k.grad().to_vector<double>()),
                                      max_abs_diff(hand_dv, v.grad().to_vector<double>())});
  std::printf("  max |by hand - fused causal_attention| over O, dQ, dK, dV = %.1e\n", worst_fused);
  std::printf("  max |by hand - scaled_dot_product_attention| over O, dQ, dK, dV = %.1e\n", worst_comp);
  std::printf("  attention backward by hand: %s\n", verdict(std::max(worst_fused, worst_comp)));
  return std::max(worst_fused, worst_comp) <= 1e-12 ? 0 : 1;
}

// A whole TransformerLM: load the golden weights, run forward + cross-entropy + backward in float64,
// compare the loss and every parameter's gradient with what PyTorch computed for the same model.
int check_golden(const std::string& file) {
  const std::string path = std::string(TAPEGRAD_SHARED_DIR) + "/data/reference/" + file;
  if (!std::filesystem::exists(path)) {
    const char* require = std::getenv("TAPEGRAD_REQUIRE_SHARED");
    if (require && std::string(require) == "1") {
      std::fprintf(stderr, "error: %s not found (TAPEGRAD_REQUIRE_SHARED=1)\n", path.c_str());
      return 1;
    }
    std::printf("SKIP: %s not found (the golden data is test data kept beside CI's clone, not in the repository)\n", path.c_str());
    return 77;
  }
  std::map<std::string, std::string> meta;
  std::map<std::string, Tensor> golden = load_safetensors(path, &meta);  // the library's safetensors reader
  const auto num = [&](const char* key) { return std::stod(meta.at(key)); };
  nn::TransformerLMConfig c;
  c.vocab_size = static_cast<int64_t>(num("vocab"));
  c.context_length = static_cast<int64_t>(num("seq"));
  c.d_model = static_cast<int64_t>(num("d_model"));
  c.n_layers = static_cast<int64_t>(num("layers"));
  c.n_heads = static_cast<int64_t>(num("heads"));
  c.n_kv_heads = static_cast<int64_t>(num("kv_heads"));
  c.d_ff = static_cast<int64_t>(num("d_ff"));
  c.rope_theta = num("theta");
  c.eps = num("eps");
  c.dtype = kFloat64;
  nn::TransformerLM lm(c);
  nn::StateDict weights;
  for (const auto& [name, t] : golden)
    if (name.rfind("weights.", 0) == 0) weights[name.substr(8)] = t;
  lm.load_state_dict(weights);  // strict: every name must match

  const Tensor ids = golden.at("inputs.token_ids");  // [B, T]
  Tensor loss = nn::cross_entropy(lm(ids), golden.at("inputs.targets"));
  loss.backward();
  const double want = golden.at("expected.loss").item<double>();
  std::printf("%s: V=%lld C=%lld layers=%lld H=%lld Hkv=%lld, ids [B=%lld, T=%lld], %lld parameters\n", file.c_str(),
              (long long)c.vocab_size, (long long)c.d_model, (long long)c.n_layers, (long long)c.n_heads,
              (long long)c.n_kv_heads, (long long)ids.size(0), (long long)ids.size(1), (long long)lm.num_parameters());
  std::printf("  loss: tapegrad %.12f, PyTorch %.12f\n", loss.item<double>(), want);
  // Per parameter: max |ours − theirs| / max |theirs| (relative to the gradient's own scale).
  double worst = 0;
  for (const auto& [name, p] : lm.named_parameters()) {
    const std::vector<double> ours = p.grad().to_vector<double>();
    const std::vector<double> theirs = golden.at("grads." + name).to_vector<double>();
    double scale = 0;
    for (double t : theirs) scale = std::max(scale, std::abs(t));
    const double e = max_abs_diff(ours, theirs) / scale;
    worst = std::max(worst, e);
  }
  // (The worst one is rounding noise, ~1e-16, so which parameter it is differs between machines.)
  std::printf("  %zu parameter gradients, worst max|ours - PyTorch| / max|PyTorch| = %.1e: %s\n",
              lm.named_parameters().size(), worst, worst < 1e-10 ? "MATCH" : "MISMATCH");
  return worst < 1e-10 && std::abs(loss.item<double>() - want) < 1e-10 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (argc > 2 || (!mode.empty() && mode != "--golden")) {
      std::fprintf(stderr, "usage: %s [--golden]\n", argv[0]);
      return 2;
    }
    if (mode == "--golden") {
      for (const char* file : {"lm_mha_seed0.safetensors", "lm_gqa_seed1.safetensors"}) {
        const int rc = check_golden(file);
        if (rc != 0) return rc;
      }
      return 0;
    }
    const int rms = check_rmsnorm();
    const int attn = check_attention();
    return rms != 0 || attn != 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

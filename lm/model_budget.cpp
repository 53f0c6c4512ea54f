// model_budget.cpp — a config's allocation from the config alone, and the loaders' check (see model_budget.h).
#include "lm/model_budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "kernels/error.h"

namespace tapegrad::lm {

namespace {
std::atomic<double> g_slack{kModelAllocationSlack};
}  // namespace

double model_allocation_slack() { return g_slack.load(); }
void set_model_allocation_slack(double bytes) {
  TG_CHECK(bytes >= 0, "set_model_allocation_slack: {} bytes is negative", bytes);
  g_slack.store(bytes);
}

ModelAllocation model_allocation(const nn::TransformerLMConfig& c) {
  const auto pos = [](int64_t v) { return v > 0 ? double(v) : 0.0; };
  const double V = pos(c.vocab_size), T = pos(c.context_length), C = pos(c.d_model), L = pos(c.n_layers);
  const double H = pos(c.n_heads), Hkv = c.n_kv_heads > 0 ? double(c.n_kv_heads) : H;
  // d_ff's default as nn::default_d_ff computes it, in double (no config can overflow it): 4C for ReLU², else
  // SwiGLU's ⌈8C/3⌉ rounded up to 64.
  const bool relu2 = c.ffn == nn::FFNKind::ReLU2;
  const double F = c.d_ff > 0 ? double(c.d_ff) : relu2 ? 4 * C : std::ceil(std::ceil(8 * C / 3) / 64) * 64;
  const double D = H > 0 ? C / H : 0;
  const double s = double(dtype_size(c.dtype));
  const double gain = c.norm_gain ? 1 : 0;  // TransformerLMConfig::parameter_count, term by term
  ModelAllocation a;
  a.embeddings = V * C * (c.tie_embeddings ? 1 : 2) * s;
  const double block = gain * (2 * C + (c.qk_norm ? 2 * D : 0)) + 2 * C * C + 2 * C * Hkv * D + (relu2 ? 2 : 3) * C * F;
  a.blocks = (gain * C * (c.embed_norm ? 2 : 1) + L * block) * s;
  // Two tables of T·D/2: built as float64 vectors, made float64 tensors, kept in the dtype; the position ids.
  a.rope = T * D * (8 + 8 + s) + 16 * T;
  a.kv_cache = L * 2 * Hkv * T * D * s;
  return a;
}

std::string format_binary_bytes(double bytes) {
  static constexpr std::pair<double, const char*> kUnits[] = {
      {double(uint64_t(1) << 30), "GiB"}, {double(1 << 20), "MiB"}, {double(1 << 10), "KiB"}};
  for (const auto& [scale, unit] : kUnits) {
    if (bytes < scale) continue;
    const double v = bytes / scale;
    return v >= 1e6 ? fmt::format("{:.1e} {}", v, unit) : fmt::format("{:.{}f} {}", v, v >= 100 ? 0 : 2, unit);
  }
  return fmt::format("{:.0f} B", bytes);
}

void check_model_allocation(const nn::TransformerLMConfig& c, double file_values, const std::string& what,
                            const char* context_field) {
  const ModelAllocation a = model_allocation(c);
  const double held = file_values * double(dtype_size(c.dtype));  // the file's values as the model holds them
  const double slack = model_allocation_slack();
  const double limit = held + slack;
  const double weights = a.embeddings + a.blocks, context = a.rope + a.kv_cache;
  if (weights <= limit && context <= limit) return;
  // The field at fault: the weights' first (n_layers also multiplies the KV cache), then context_length's.
  std::string part;
  if (weights <= limit)
    part = fmt::format("{} {} (head size {}) asks for {} of RoPE tables and KV cache", context_field,
                       c.context_length, c.n_heads > 0 ? c.d_model / c.n_heads : 0, format_binary_bytes(context));
  else if (a.embeddings >= a.blocks)
    part = fmt::format("vocab_size {} (d_model {}) asks for {} of weights", c.vocab_size, c.d_model,
                       format_binary_bytes(weights));
  else
    part = fmt::format("n_layers {} (d_model {}, d_ff {}) asks for {} of weights", c.n_layers, c.d_model, c.d_ff,
                       format_binary_bytes(weights));
  throw Error(fmt::format("{}: {}, more than the {} of weights in the file plus {} (lm/model_budget.h)", what, part,
                          format_binary_bytes(held), format_binary_bytes(slack)));
}

}  // namespace tapegrad::lm

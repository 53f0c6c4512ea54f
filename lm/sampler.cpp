// sampler.cpp — greedy / temperature / top-k / top-p sampling (see sampler.h for the semantics).
//
// With T the temperature and m = max_j z_j, the weight of token i is
//   w_i = exp((z_i − m)/T) ∈ [0, 1]   (= 1 for the argmax, so Σ w ≥ 1 and nothing overflows),
// and p_i = w_i / Σ_j w_j over the tokens still kept. Since T > 0 and exp is monotone, the order of
// the logits is the order of the probabilities: tokens are ranked by (z desc, id asc), a strict total
// order, so top_k and the top_p prefix are the same whatever the sort algorithm does with equal keys.
#include "lm/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernels/error.h"

namespace tapegrad::lm {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct RowInfo {
  double max;
  uint32_t argmax;  // the lowest id holding the max
};

template <class T>
RowInfo scan_row(std::span<const T> z) {
  TG_CHECK(!z.empty(), "Sampler: the row of logits is empty");
  TG_CHECK(z.size() <= std::numeric_limits<uint32_t>::max(), "Sampler: {} logits do not fit 32-bit token ids",
           z.size());
  double m = -kInf;
  uint32_t arg = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double v = static_cast<double>(z[i]);
    TG_CHECK(v < kInf, "Sampler: the logit of token {} is {} (NaN or +inf)", i, v);
    if (v > m) {
      m = v;
      arg = static_cast<uint32_t>(i);
    }
  }
  TG_CHECK(m > -kInf, "Sampler: every logit is -inf ({} tokens)", z.size());
  return {m, arg};
}

// Fills s.ids (kept ids, draw order), s.weights (their w_i) and s.total (Σ weights in that order).
// Not for greedy options.
template <class T>
void select_tokens(std::span<const T> z, const SamplerOptions& o, const RowInfo& row, Sampler::Scratch& s) {
  const size_t V = z.size();
  const double m = row.max, temperature = o.temperature;
  const auto weight = [&](uint32_t i) { return std::exp((static_cast<double>(z[i]) - m) / temperature); };
  const auto better = [&](uint32_t a, uint32_t b) {
    const double za = static_cast<double>(z[a]), zb = static_cast<double>(z[b]);
    return za > zb || (za == zb && a < b);
  };
  // The top_p prefix is compared with top_p · Σw less a relative 1e-12, which absorbs the rounding
  // of the sums: a top_p equal to a cumulative mass keeps exactly that prefix, as exact arithmetic would.
  const auto threshold = [&](double total) { return o.top_p * total * (1 - 1e-12); };
  const bool use_top_k = o.top_k > 0 && static_cast<uint64_t>(o.top_k) < V;
  const bool use_top_p = o.top_p < 1;

  auto& ids = s.ids;
  auto& w = s.weights;

  if (use_top_k) {
    // One pass keeping the k best in a heap whose top is the worst of them (ids arrive in
    // increasing order, so an equal logit never displaces it: strict > is the tie rule), then
    // sorted into draw order: one comparison per token plus O(log k) per displacement.
    const size_t k = static_cast<size_t>(o.top_k);
    auto& heap = s.heap;
    const auto heap_better = [](const std::pair<double, uint32_t>& a, const std::pair<double, uint32_t>& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    heap.clear();
    for (uint32_t i = 0; i < k; ++i) heap.emplace_back(static_cast<double>(z[i]), i);
    std::make_heap(heap.begin(), heap.end(), heap_better);
    for (size_t i = k; i < V; ++i) {
      const double v = static_cast<double>(z[i]);
      if (v > heap.front().first) {
        std::pop_heap(heap.begin(), heap.end(), heap_better);
        heap.back() = {v, static_cast<uint32_t>(i)};
        std::push_heap(heap.begin(), heap.end(), heap_better);
      }
    }
    std::sort_heap(heap.begin(), heap.end(), heap_better);  // best first
    ids.resize(k);
    w.resize(k);
    double total = 0;
    for (size_t j = 0; j < k; ++j) {
      ids[j] = heap[j].second;
      total += (w[j] = weight(ids[j]));
    }
    if (use_top_p) {
      const double need = threshold(total);
      double cum = 0;
      size_t keep = k;
      for (size_t j = 0; j < k; ++j) {
        cum += w[j];
        if (cum >= need) {
          keep = j + 1;
          break;
        }
      }
      ids.resize(keep);
      w.resize(keep);
    }
  } else if (use_top_p) {
    // Weights of every token (the mass is over the whole vocabulary) and a histogram of that mass
    // over x = (max z − z)/T in buckets of width 1/8 (x is monotone in the rank, so each bucket
    // holds a run of the ranked order). The buckets up to the one where the mass reaches the
    // threshold hold the whole prefix: only those tokens are moved to the front and sorted.
    // Should rounding leave the sorted part short of the threshold, the rest is sorted on in
    // growing chunks (nth_element of the next `chunk` best, then sort), which is exact whatever
    // the buckets said.
    constexpr int kBuckets = 256;
    constexpr double kPerUnit = 8.0;
    auto& by_id = s.by_id;
    auto& bucket_of = s.bucket_of;
    by_id.resize(V);
    bucket_of.resize(V);
    std::array<double, kBuckets> mass{};
    double total = 0;
    for (uint32_t i = 0; i < V; ++i) {
      const double x = (m - static_cast<double>(z[i])) / temperature;  // −x = (z_i − m)/T exactly
      const double wi = std::exp(-x);
      const double xb = x * kPerUnit;
      const int b = xb < kBuckets - 1 ? static_cast<int>(xb) : kBuckets - 1;
      by_id[i] = wi;
      bucket_of[i] = static_cast<uint8_t>(b);
      total += wi;
      mass[static_cast<size_t>(b)] += wi;
    }
    const double need = threshold(total);
    int last = kBuckets - 1;
    double bucket_cum = 0;
    for (int b = 0; b < kBuckets; ++b) {
      bucket_cum += mass[static_cast<size_t>(b)];
      if (bucket_cum >= need) {
        last = b;
        break;
      }
    }
    ids.resize(V);
    std::iota(ids.begin(), ids.end(), uint32_t{0});
    const size_t candidates = static_cast<size_t>(
        std::partition(ids.begin(), ids.end(), [&](uint32_t i) { return bucket_of[i] <= last; }) - ids.begin());
    double cum = 0;
    size_t keep = V, done = 0, chunk = candidates;
    while (done < V) {
      const size_t end = std::min(V, done + chunk);
      if (done > 0 && end < V)
        std::nth_element(ids.begin() + static_cast<ptrdiff_t>(done), ids.begin() + static_cast<ptrdiff_t>(end - 1),
                         ids.end(), better);
      std::sort(ids.begin() + static_cast<ptrdiff_t>(done), ids.begin() + static_cast<ptrdiff_t>(end), better);
      for (size_t j = done; j < end; ++j) {
        cum += by_id[ids[j]];
        if (cum >= need) {
          keep = j + 1;
          break;
        }
      }
      if (keep < V) break;
      done = end;
      chunk = std::max<size_t>(64, 4 * chunk);
    }
    ids.resize(keep);
    w.resize(keep);
    for (size_t j = 0; j < keep; ++j) w[j] = by_id[ids[j]];
  } else {
    // Every token kept, in id order.
    ids.resize(V);
    std::iota(ids.begin(), ids.end(), uint32_t{0});
    w.resize(V);
    for (uint32_t i = 0; i < V; ++i) w[i] = weight(i);
  }
  double total = 0;
  for (const double x : w) total += x;
  s.total = total;  // ≥ 1: the argmax is always kept (first in top_k / top_p order) and has w = 1
}

// Inverse CDF: the first kept token whose cumulative weight exceeds u · total (u ∈ [0, 1)). A
// zero-weight token is never chosen; rounding that leaves no cumulative weight above u · total
// picks the last token of positive weight.
uint32_t draw(const Sampler::Scratch& s, double u) {
  const double r = u * s.total;
  double cum = 0;
  for (size_t j = 0; j < s.ids.size(); ++j) {
    cum += s.weights[j];
    if (cum > r) return s.ids[j];
  }
  for (size_t j = s.ids.size(); j-- > 0;)
    if (s.weights[j] > 0) return s.ids[j];
  return s.ids.front();  // unreachable: the argmax has weight 1
}

template <class T>
uint32_t sample_row(std::span<const T> z, const SamplerOptions& o, Generator& g, Sampler::Scratch& s) {
  const RowInfo row = scan_row(z);
  if (o.is_greedy()) return row.argmax;
  select_tokens(z, o, row, s);
  return draw(s, g.uniform());
}

template <class T>
std::vector<std::pair<uint32_t, double>> distribution_of(std::span<const T> z, const SamplerOptions& o) {
  const RowInfo row = scan_row(z);
  if (o.is_greedy()) return {{row.argmax, 1.0}};
  Sampler::Scratch s;
  select_tokens(z, o, row, s);
  std::vector<std::pair<uint32_t, double>> out(s.ids.size());
  for (size_t j = 0; j < s.ids.size(); ++j) out[j] = {s.ids[j], s.weights[j] / s.total};
  return out;
}

}  // namespace

void SamplerOptions::validate() const {
  TG_CHECK(std::isfinite(temperature) && temperature >= 0, "--temperature must be a finite number >= 0, but is {}",
           temperature);
  TG_CHECK(top_k >= 0, "--top-k must be >= 1 (0: off), but is {}", top_k);
  TG_CHECK(top_p > 0 && top_p <= 1, "--top-p must be in (0, 1], but is {}", top_p);
}

uint32_t drawn_token_id(double id, double status) {
  TG_CHECK(status > -kInf && status < kInf, "Sampler: the logit of token {} is {} (NaN or +inf, or every logit is -inf)",
           static_cast<int64_t>(id), status);
  return static_cast<uint32_t>(id);
}

Sampler::Sampler(SamplerOptions options, uint64_t seed) : options_(options), generator_(seed) { options_.validate(); }

uint32_t Sampler::sample(std::span<const float> logits) { return sample_row(logits, options_, generator_, scratch_); }
uint32_t Sampler::sample(std::span<const double> logits) { return sample_row(logits, options_, generator_, scratch_); }

std::vector<std::pair<uint32_t, double>> Sampler::distribution(std::span<const double> logits) const {
  return distribution_of(logits, options_);
}
std::vector<std::pair<uint32_t, double>> Sampler::distribution(std::span<const float> logits) const {
  return distribution_of(logits, options_);
}

}  // namespace tapegrad::lm

// sample_token.cu — the next token drawn from one row of logits on the GPU, with lm::Sampler's rules
// (lm/sampler.h), so that a decode step sends the host one {id, status} pair instead of the [V] row.
//
// With z the logits [V], m = max z and T the temperature, the weight of token i is
//   w_i = exp((z_i − m)/T)   (float64, as on the host; = 1 for the argmax)
// Tokens are ranked by (z desc, id asc) — a strict total order — through a 64-bit rank key per token:
// the logit's bits made order-preserving and inverted (smaller key = larger logit), −0 read as +0 (the
// host compares values, −0 == +0); the id breaks ties.
//   greedy:           the argmax (the lowest id among equal maxima).
//   nothing cut:      draw in id order: the first i whose cumulative weight exceeds u · Σw.
//   top_k / top_p:    the ranked tokens are produced best first in chunks of kThreads (below), each with its
//                     weight and cumulative weight, into a scratch list; top_p keeps the shortest prefix whose
//                     cumulative weight reaches top_p · (mass of the top_k, or of all tokens) · (1 − 1e-12);
//                     the draw is the first kept token whose cumulative weight exceeds u · (kept mass).
// A chunk: the c best tokens after the last one produced, found by a radix select on the rank key (one
// histogram of 256 digit counts per 8 bits, integer atomics; it stops at the first digit whose bucket is
// taken whole, usually within 2–3 passes; equal logits at the boundary are taken lowest id first), gathered
// into shared memory, sorted there (bitonic), weighed and scanned.
//
// One block of kThreads threads, one launch, no host synchronisation (capturable). Every sum runs in a fixed
// order (per-thread runs, then a shared-memory scan or tree), so the same row and u give the same id every
// time; it is lm::Sampler's id unless u · Σw falls within rounding of a boundary (the host sums sequentially).
// Cost: a few passes over the row per chunk; top_k ≤ kThreads is one chunk, a wide top_p (thousands of
// tokens kept) takes one chunk per kThreads tokens. Not measured on a GPU yet.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/dispatch.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/runtime.h"
#include "kernels/error.h"

namespace tapegrad::kernels::cuda {
namespace {

constexpr int kThreads = 512;  // also the tokens sorted per chunk
static_assert(kThreads >= 256, "one thread per digit of the radix select");
constexpr long long kNone = 0x7fffffffffffffffLL;

struct MinOp {
  __device__ long long operator()(long long a, long long b) const { return a < b ? a : b; }
};
struct MaxOp {
  __device__ long long operator()(long long a, long long b) const { return a > b ? a : b; }
};

// Reduction over the block through shared memory, in a fixed tree order; every thread gets the result.
template <class T, class F>
__device__ T block_reduce(T v, T* buf, F f) {
  const int t = threadIdx.x;
  buf[t] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (t < s) buf[t] = f(buf[t], buf[t + s]);
    __syncthreads();
  }
  const T r = buf[0];
  __syncthreads();
  return r;
}
__device__ inline double max_double(double a, double b) { return a > b ? a : b; }
struct MaxDouble {
  __device__ double operator()(double a, double b) const { return max_double(a, b); }
};

// Inclusive and exclusive prefix sums of one double per thread (Hillis–Steele in shared memory) and the total.
struct Scan {
  double inclusive, exclusive, total;
};
__device__ Scan block_scan(double v, double (*buf)[kThreads]) {
  const int t = threadIdx.x;
  int in = 0;
  buf[0][t] = v;
  __syncthreads();
  for (int off = 1; off < kThreads; off <<= 1) {
    double x = buf[in][t];
    if (t >= off) x += buf[in][t - off];
    buf[1 - in][t] = x;
    __syncthreads();
    in = 1 - in;
  }
  const Scan s{buf[in][t], t > 0 ? buf[in][t - 1] : 0.0, buf[in][kThreads - 1]};
  __syncthreads();
  return s;
}

// The logit as float64 (bfloat16 and float32 widen exactly), and its rank key (see the header).
template <class S>
__device__ inline double logit(const S* z, int64_t i) {
  return static_cast<double>(static_cast<cpu::compute_t<S>>(z[i]));
}
template <class S>
__device__ inline uint64_t rank_key(const S* z, int64_t i) {
  using C = cpu::compute_t<S>;
  C c = static_cast<C>(z[i]);
  if (c == C(0)) c = C(0);  // −0 → +0
  if constexpr (sizeof(C) == 8) {
    uint64_t b;
    memcpy(&b, &c, 8);
    const uint64_t ascending = (b >> 63) ? ~b : (b | (uint64_t(1) << 63));
    return ~ascending;
  } else {
    uint32_t b;
    memcpy(&b, &c, 4);
    const uint32_t ascending = (b >> 31) ? ~b : (b | 0x80000000u);
    return uint64_t(~ascending);
  }
}
__device__ inline uint64_t high_bits(uint64_t key, int shift) { return shift >= 64 ? 0 : key >> shift; }

// The block's shared memory.
struct Shared {
  uint64_t sort_key[kThreads];
  uint32_t sort_id[kThreads];
  double scan[2][kThreads];
  long long ints[kThreads];
  double doubles[kThreads];
  unsigned hist[256];
  unsigned gathered;
  // the radix select
  uint64_t prefix;
  long long need;
  int shift, take_all;
  // the chunk loop
  long long produced, kept;
  double cum;
  uint64_t last_key;
  uint32_t last_id;
  int has_last, done;
};

// The ranked list in global scratch: id, weight and cumulative weight of the j-th best token.
struct RankedList {
  uint32_t* id;
  double* w;
  double* cum;
};

// Gathers the c best tokens ranked after (last_key, last_id) into sh.sort_key / sh.sort_id [0, c), unordered.
template <class S>
__device__ void gather_best(const S* z, int64_t V, long long c, bool has_last, uint64_t last_key, uint32_t last_id,
                            Shared& sh) {
  const int t = threadIdx.x;
  const auto after = [&](uint64_t key, int64_t i) {
    return !has_last || key > last_key || (key == last_key && uint32_t(i) > last_id);
  };
  if (t == 0) {
    sh.prefix = 0;
    sh.need = c;
    sh.shift = 8 * int(sizeof(cpu::compute_t<S>));
    sh.take_all = 0;
    sh.gathered = 0;
  }
  __syncthreads();
  for (;;) {  // one pass per 8 bits of the key, from the top
    const int shift = sh.shift - 8;
    const uint64_t prefix = sh.prefix;
    for (int d = t; d < 256; d += kThreads) sh.hist[d] = 0;
    __syncthreads();
    for (int64_t i = t; i < V; i += kThreads) {
      const uint64_t key = rank_key(z, i);
      if (after(key, i) && high_bits(key, shift + 8) == prefix) atomicAdd(&sh.hist[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    // The digit whose bucket holds the need-th candidate: the one bucket with before < need ≤ before + count
    // (counts below 2^53: exact in the scan's doubles).
    const long long need = sh.need;
    const Scan counts = block_scan(t < 256 ? double(sh.hist[t]) : 0.0, sh.scan);
    if (t < 256 && counts.exclusive < double(need) && double(need) <= counts.inclusive) {
      sh.need = need - (long long)counts.exclusive;
      sh.prefix = (prefix << 8) | uint64_t(t);
      sh.shift = shift;
      sh.take_all = sh.need == (long long)sh.hist[t];
    }
    __syncthreads();
    if (sh.take_all || sh.shift == 0) break;
  }
  const uint64_t prefix = sh.prefix;
  const int shift = sh.shift;
  if (sh.take_all) {  // every candidate whose top bits are ≤ prefix
    for (int64_t i = t; i < V; i += kThreads) {
      const uint64_t key = rank_key(z, i);
      if (after(key, i) && (key >> shift) <= prefix) {
        const unsigned slot = atomicAdd(&sh.gathered, 1u);
        sh.sort_key[slot] = key;
        sh.sort_id[slot] = uint32_t(i);
      }
    }
  } else {  // the keys below prefix, and the lowest `need` ids of those equal to it: contiguous runs per thread
    const long long need = sh.need;
    const int64_t per = (V + kThreads - 1) / kThreads, begin = t * per, end = begin + per < V ? begin + per : V;
    double ties = 0;
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t key = rank_key(z, i);
      ties += double(key == prefix && after(key, i));
    }
    long long rank = (long long)block_scan(ties, sh.scan).exclusive;
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t key = rank_key(z, i);
      if (!after(key, i)) continue;
      bool take = key < prefix;
      if (key == prefix) take = rank++ < need;
      if (take) {
        const unsigned slot = atomicAdd(&sh.gathered, 1u);
        sh.sort_key[slot] = key;
        sh.sort_id[slot] = uint32_t(i);
      }
    }
  }
  __syncthreads();
}

// Sorts sh.sort_key / sh.sort_id [0, c) by (key, id), the rest padded with the largest key.
__device__ void sort_chunk(long long c, Shared& sh) {
  const int t = threadIdx.x;
  if (t >= c) {
    sh.sort_key[t] = ~uint64_t(0);
    sh.sort_id[t] = ~uint32_t(0);
  }
  __syncthreads();
  for (int k = 2; k <= kThreads; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      const int o = t ^ j;
      if (o > t) {
        const bool ascending = (t & k) == 0;
        const uint64_t ka = sh.sort_key[t], kb = sh.sort_key[o];
        const uint32_t ia = sh.sort_id[t], ib = sh.sort_id[o];
        const bool a_after_b = ka > kb || (ka == kb && ia > ib);
        if (a_after_b == ascending) {
          sh.sort_key[t] = kb, sh.sort_key[o] = ka;
          sh.sort_id[t] = ib, sh.sort_id[o] = ia;
        }
      }
      __syncthreads();
    }
  }
}

template <class S>
__global__ void sample_token_kernel(const S* z, int64_t V, const double* uniform, TokenSampling o, RankedList list,
                                    int64_t* token, double* result) {
  __shared__ Shared sh;
  const int t = threadIdx.x;
  const auto finish = [&](long long id, double status) {
    if (t == 0) {
      result[0] = double(id);
      result[1] = status;
      if (token != nullptr) token[0] = id;
    }
  };
  // The row: its first NaN / +inf, its max and argmax.
  long long bad = kNone;
  double m = -INFINITY;
  for (int64_t i = t; i < V; i += kThreads) {
    const double v = logit(z, i);
    if (!(v < INFINITY) && i < bad) bad = i;
    m = max_double(m, v);
  }
  bad = block_reduce(bad, sh.ints, MinOp{});
  if (bad != kNone) return finish(bad, logit(z, bad));
  m = block_reduce(m, sh.doubles, MaxDouble{});
  if (m == -INFINITY) return finish(0, m);
  long long argmax = kNone;
  for (int64_t i = t; i < V; i += kThreads)
    if (logit(z, i) == m && i < argmax) argmax = i;
  argmax = block_reduce(argmax, sh.ints, MinOp{});
  if (o.greedy || o.temperature == 0) return finish(argmax, m);

  const double T = o.temperature, u = uniform[0];
  const auto weight = [&](int64_t i) { return exp((logit(z, i) - m) / T); };
  const bool use_top_k = o.top_k > 0 && o.top_k < V, use_top_p = o.top_p < 1;
  const int64_t per = (V + kThreads - 1) / kThreads, begin = t * per, end = begin + per < V ? begin + per : V;

  if (!use_top_k && !use_top_p) {  // every token, in id order: contiguous runs per thread
    double s = 0;
    for (int64_t i = begin; i < end; ++i) s += weight(i);
    const Scan scan = block_scan(s, sh.scan);
    const double r = u * scan.total;
    long long first = kNone, last_positive = -1;
    double cum = scan.exclusive;
    for (int64_t i = begin; i < end; ++i) {
      const double w = weight(i);
      cum += w;
      if (w > 0) last_positive = i;
      if (first == kNone && w > 0 && cum > r) first = i;
    }
    first = block_reduce(first, sh.ints, MinOp{});
    last_positive = block_reduce(last_positive, sh.ints, MaxOp{});
    return finish(first != kNone ? first : last_positive, m);
  }

  // Ranked tokens, best first, in chunks; top_p alone stops at the prefix that reaches its mass.
  const long long L = use_top_k ? o.top_k : V;
  double need = 0;
  if (use_top_p && !use_top_k) {
    double s = 0;
    for (int64_t i = begin; i < end; ++i) s += weight(i);
    need = o.top_p * block_scan(s, sh.scan).total * (1 - 1e-12);
  }
  if (t == 0) {
    sh.produced = 0, sh.cum = 0, sh.has_last = 0, sh.done = 0, sh.kept = L;
    sh.last_key = 0, sh.last_id = 0;
  }
  __syncthreads();
  for (;;) {
    const long long produced = sh.produced;
    if (produced >= L || sh.done) break;
    const long long c = L - produced < kThreads ? L - produced : kThreads;
    const double cum_before = sh.cum;
    gather_best(z, V, c, sh.has_last != 0, sh.last_key, sh.last_id, sh);
    sort_chunk(c, sh);
    const double w = t < c ? weight(sh.sort_id[t]) : 0.0;
    const double cum = cum_before + block_scan(w, sh.scan).inclusive;
    if (t < c) {
      list.id[produced + t] = sh.sort_id[t];
      list.w[produced + t] = w;
      list.cum[produced + t] = cum;
    }
    long long reached = kNone;
    if (use_top_p && !use_top_k && t < c && cum >= need) reached = t;
    reached = block_reduce(reached, sh.ints, MinOp{});
    if (t == c - 1) {
      sh.produced = produced + c;
      sh.cum = cum;
      sh.last_key = sh.sort_key[t];
      sh.last_id = sh.sort_id[t];
      sh.has_last = 1;
      if (reached != kNone) sh.done = 1, sh.kept = produced + reached + 1;
    }
    __syncthreads();
  }
  long long kept = sh.kept;
  if (use_top_p && use_top_k) {  // the prefix of the top_k that reaches top_p of their mass
    const double need_k = o.top_p * list.cum[L - 1] * (1 - 1e-12);
    long long reached = kNone;
    for (long long j = t; j < L; j += kThreads)
      if (list.cum[j] >= need_k && j < reached) reached = j;
    reached = block_reduce(reached, sh.ints, MinOp{});
    if (reached != kNone) kept = reached + 1;
  }
  const double r = u * list.cum[kept - 1];
  long long first = kNone, last_positive = -1;
  for (long long j = t; j < kept; j += kThreads) {
    if (list.w[j] > 0) last_positive = j;
    if (list.w[j] > 0 && list.cum[j] > r && j < first) first = j;
  }
  first = block_reduce(first, sh.ints, MinOp{});
  last_positive = block_reduce(last_positive, sh.ints, MaxOp{});
  finish(list.id[first != kNone ? first : last_positive], m);
}

template <class S>
void sample_typed(CudaBackend& backend, const TensorView& token, const TensorView& result, const TensorView& logits,
                  const TensorView& uniform, const TokenSampling& o) {
  const int64_t V = logits.numel();
  const bool ranked = !(o.greedy || o.temperature == 0) && ((o.top_k > 0 && o.top_k < V) || o.top_p < 1);
  const int64_t L = o.top_k > 0 && o.top_k < V ? o.top_k : V;
  const size_t rows = ranked ? size_t(L) : 0;
  ScratchBuffer ids(backend, rows * sizeof(uint32_t)), weights(backend, rows * sizeof(double)),
      cums(backend, rows * sizeof(double));
  const RankedList list{ids.as<uint32_t>(), weights.as<double>(), cums.as<double>()};
  launch(sample_token_kernel<S>, dim3(1), dim3(kThreads), 0, static_cast<const S*>(logits.data), V,
         static_cast<const double*>(uniform.data), o, list, static_cast<int64_t*>(token.data),
         static_cast<double*>(result.data));
}

}  // namespace

bool CudaBackend::sample_token(const TensorView& token, const TensorView& result, const TensorView& logits,
                               const TensorView& uniform, const TokenSampling& o) {
  const int64_t V = logits.numel();
  TG_CHECK(logits.ndim() == 1 && V >= 1 && V <= int64_t(UINT32_MAX) && logits.is_contiguous(),
           "sample_token: logits must be one contiguous row [V] of 1 to 2^32 - 1 tokens, got {}", logits.shape);
  TG_CHECK(result.dtype == DType::Float64 && result.numel() == 2 && result.is_contiguous(),
           "sample_token: result must be a contiguous float64 [2], got {} {}", result.dtype, result.shape);
  TG_CHECK(token.data == nullptr || (token.dtype == DType::Int64 && token.numel() == 1),
           "sample_token: token must be an int64 [1], got {} {}", token.dtype, token.shape);
  const bool greedy = o.greedy || o.temperature == 0;
  TG_CHECK(greedy || (uniform.data != nullptr && uniform.dtype == DType::Float64 && uniform.numel() == 1),
           "sample_token: uniform must be a float64 [1] (the draw's u), got {} {}", uniform.dtype, uniform.shape);
  TG_CHECK(std::isfinite(o.temperature) && o.temperature >= 0 && o.top_k >= 0 && o.top_p > 0 && o.top_p <= 1,
           "sample_token: invalid sampling options (temperature {}, top_k {}, top_p {})", o.temperature, o.top_k,
           o.top_p);
  switch (logits.dtype) {
    case DType::Float32:
      sample_typed<float>(*this, token, result, logits, uniform, o);
      return true;
    case DType::Float64:
      sample_typed<double>(*this, token, result, logits, uniform, o);
      return true;
    case DType::BFloat16:
      sample_typed<bfloat16>(*this, token, result, logits, uniform, o);
      return true;
    default:
      return false;
  }
}

}  // namespace tapegrad::kernels::cuda

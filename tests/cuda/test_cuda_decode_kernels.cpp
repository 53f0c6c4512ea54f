// test_cuda_decode_kernels.cpp — the two backend functions of graph decoding on the CUDA backend
// (kernels/cuda/index_copy.cu, kernels/cuda/fused_attention.cu: causal_attention_prefix), on the emulated
// device in CI and on a GPU in scripts/gpu_check.sh (also under compute-sanitizer):
//  * index_copy (through index_copy_) against a byte-level host loop: dims 0/1/2, strided views, float32,
//    bfloat16, int64 and bool, int32/int64 indices, both kernel paths (≤ 32 indices: one kernel; more: the
//    owner scratch); a repeated index writes the last j's row; a bad index is the one clear error and nothing
//    is written; an empty index writes nothing; no host synchronisation; captured once in a CUDA graph and
//    replayed with the index (and the rows) changed between replays;
//  * causal_attention_prefix against causal_attention on k, v narrowed to L keys: bit for bit for L > T
//    (T < 16: both run the row-per-warp kernel with the same bounds) in float32, float64 and bfloat16, D 32/64/128,
//    GQA; at L = T (the narrowed call runs the blocked kernels) against the CPU with a tolerance; the bfloat16
//    row-per-warp forward reading k, v as bfloat16 gives the bits of the float32 kernel on widened inputs; a bad
//    key count (L < T, L > Tc) is the one clear error with out and lse untouched; captured once and replayed
//    with the key count changed between replays, each replay giving that L's bits.
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "kernels/bf16_bridge.h"
#include "kernels/cuda/memory_info.h"
#include "kernels/device_graph.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/same_bits.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
using testing::elements_differing;

namespace {

// Random values of any dtype (distinct enough that a wrong row shows).
Tensor random_of(const Shape& shape, DType t) {
  if (t == kBool) return lt(rand(shape, Options(kFloat32)), 0.5);
  if (t == kInt64 || t == kInt32) return randint(-1000000, 1000000, shape, Options(t));
  return randn(shape, Options(kFloat32)).to(t);
}

// The reference: out[.., index[j], ..] = src[.., j, ..] for j = 0, 1, … in order, byte by byte on host copies.
Tensor host_index_copy(const Tensor& out, int dim, const std::vector<int64_t>& index, const Tensor& src) {
  const Tensor o = out.to(Device::cpu()).contiguous().clone(), s = src.to(Device::cpu()).contiguous();
  const size_t es = dtype_size(o.dtype());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < dim; ++d) outer *= o.size(d);
  for (int d = dim + 1; d < o.dim(); ++d) inner *= o.size(d);
  const int64_t V = o.size(dim), N = int64_t(index.size());
  auto* po = static_cast<unsigned char*>(o.data_ptr());
  const auto* ps = static_cast<const unsigned char*>(s.data_ptr());
  for (int64_t a = 0; a < outer; ++a)
    for (int64_t j = 0; j < N; ++j)
      std::memcpy(po + size_t((a * V + index[size_t(j)]) * inner) * es, ps + size_t((a * N + j) * inner) * es,
                  size_t(inner) * es);
  return o;
}

Tensor index_tensor(const std::vector<int64_t>& ids, DType t) {
  return from_vector<int64_t>(ids, {int64_t(ids.size())}).to(t);
}

// [d0, d1, d2] as a view of a [d2, d1, d0] buffer (every stride non-contiguous), or contiguous.
Tensor laid_out(const Tensor& logical, bool strided) {
  if (!strided) return logical.contiguous();
  return logical.transpose(0, 2).contiguous().transpose(0, 2);
}

// index_copy_ on cuda:0 (out and src laid out as asked) against the host loop, bitwise.
void check_index_copy(const Shape& out_shape, int dim, const std::vector<int64_t>& ids, DType dtype, DType index_dtype,
                      bool strided) {
  INFO(fmt::format("{} dim {} N {} {} index {}{}", out_shape, dim, ids.size(), dtype_name(dtype),
                   dtype_name(index_dtype), strided ? " strided" : ""));
  Shape src_shape = out_shape;
  src_shape[size_t(dim)] = int64_t(ids.size());
  const Tensor out_init = random_of(out_shape, dtype), src = random_of(src_shape, dtype);
  const Tensor want = host_index_copy(out_init, dim, ids, src);
  Tensor out = laid_out(on_cuda(out_init), strided);
  const Tensor src_gpu = laid_out(on_cuda(src), strided);
  REQUIRE(out.is_contiguous() == !strided);
  index_copy_(out, dim, on_cuda(index_tensor(ids, index_dtype)), src_gpu);
  CHECK(elements_differing(out, want) == 0);
  // the test could fail: the host loop changed something
  if (!ids.empty() && out_init.numel() > 0) CHECK(elements_differing(want, out_init) > 0);
}

// ids of length n in [0, V), with repeats (a fixed pattern: the same every run).
std::vector<int64_t> repeating_ids(int64_t n, int64_t V) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) ids[static_cast<size_t>(j)] = (j * 7 + 3) % V;
  return ids;
}


}  // namespace

// ---------------------------------------------------------------------------------------------- index_copy

TEST_CASE("index_copy: dims 0, 1, 2, strided views, float32/bfloat16/int64/bool, both kernel paths",
          "[cuda][decode_kernels]") {
  const Shape shape{5, 6, 7};
  for (int dim : {0, 1, 2})
    for (DType dtype : {kFloat32, kBFloat16, kInt64, kBool})
      for (bool strided : {false, true}) {
        const int64_t V = shape[size_t(dim)];
        check_index_copy(shape, dim, {V - 1}, dtype, kInt64, strided);                        // one row
        check_index_copy(shape, dim, {2, 0, V - 1}, dtype, kInt32, strided);                   // a few, distinct
        check_index_copy(shape, dim, repeating_ids(45, V), dtype, dim == 1 ? kInt32 : kInt64, strided);  // owners
      }
  // float64 and a strided index (every other element of a longer one)
  const Tensor ids_base = on_cuda(index_tensor({3, 9, 1, 9, 4, 9, 0, 9}, kInt64));
  const Tensor out_init = random_of({4, 6}, kFloat64), src = random_of({4, 4}, kFloat64);
  Tensor out = on_cuda(out_init);
  index_copy_(out, 1, ids_base.slice(0, 0, 8, 2), on_cuda(src));
  CHECK(elements_differing(out, host_index_copy(out_init, 1, {3, 1, 4, 0}, src)) == 0);
}

TEST_CASE("index_copy: a repeated index writes the last row with it, in both kernel paths", "[cuda][decode_kernels]") {
  for (int64_t n : {5, 40}) {
    INFO("N " << n);
    // src row j holds j; index: row 2 gets positions 1, 3, n − 2 (the last: n − 2), row 0 gets the rest
    std::vector<int64_t> ids(size_t(n), 0);
    ids[1] = ids[3] = ids[size_t(n - 2)] = 2;
    ids[size_t(n - 1)] = 4;
    const Tensor src = arange(0.0, double(n), 1.0, Options(kFloat32)).reshape({n, 1}) * ones({1, 3});
    Tensor out = on_cuda(full({6, 3}, -1.0));
    index_copy_(out, 0, on_cuda(index_tensor(ids, kInt64)), on_cuda(src));
    const std::vector<double> v = values(out);
    CHECK(v[0] == double(n - 3));  // row 0: the last position with index 0 is n − 3
    CHECK(v[2 * 3] == double(n - 2));
    CHECK(v[2 * 3 + 2] == double(n - 2));
    CHECK(v[4 * 3] == double(n - 1));
    CHECK(v[1 * 3] == -1.0);  // rows no index names are untouched
    CHECK(v[5 * 3] == -1.0);
    CHECK(elements_differing(out, host_index_copy(full({6, 3}, -1.0), 0, ids, src)) == 0);
  }
}

TEST_CASE("index_copy: a bad index is the one clear error and nothing is written", "[cuda][decode_kernels]") {
  for (int64_t n : {3, 40})
    for (int64_t bad : {6, -1}) {
      INFO("N " << n << " bad " << bad);
      std::vector<int64_t> ids = repeating_ids(n, 6);
      ids[2] = bad;
      const Tensor init = random_of({6, 4}, kFloat32);
      Tensor out = on_cuda(init);
      index_copy_(out, 0, on_cuda(index_tensor(ids, kInt64)), on_cuda(random_of({n, 4}, kFloat32)));
      CHECK_THROWS_WITH(gpu_be().synchronize(), Catch::Contains("index_copy") && Catch::Contains("out of range") &&
                                                    Catch::Contains(fmt::format("index {}", bad)) &&
                                                    Catch::Contains("element 2") &&
                                                    Catch::Contains("nothing was written"));
      CHECK(elements_differing(out, init) == 0);
      CHECK_NOTHROW(gpu_be().synchronize());
    }
}

TEST_CASE("index_copy: empty index, bad arguments named on the host, no host synchronisation",
          "[cuda][decode_kernels]") {
  const Tensor init = random_of({3, 4}, kFloat32);
  Tensor out = on_cuda(init);
  gpu_be().index_copy(view(out), 0, view(on_cuda(zeros({0}, Options(kInt64)))), view(on_cuda(zeros({0, 4}))));
  CHECK(elements_differing(out, init) == 0);
  const Tensor idx = on_cuda(index_tensor({1}, kInt64));
  CHECK_THROWS_WITH(gpu_be().index_copy(view(out), 0, view(idx), view(on_cuda(zeros({1, 4}, Options(kFloat64))))),
                    Catch::Contains("index_copy") && Catch::Contains("dtype"));
  CHECK_THROWS_WITH(gpu_be().index_copy(view(out), 0, view(idx), view(on_cuda(zeros({2, 4})))),
                    Catch::Contains("index_copy") && Catch::Contains("src must have"));
  CHECK_THROWS_WITH(gpu_be().index_copy(view(out), 2, view(idx), view(on_cuda(zeros({1, 4})))),
                    Catch::Contains("index_copy") && Catch::Contains("dim 2"));
  CHECK_THROWS_WITH(gpu_be().index_copy(view(out), 0, view(on_cuda(zeros({1}))), view(on_cuda(zeros({1, 4})))),
                    Catch::Contains("index_copy") && Catch::Contains("index dtype"));
  CHECK_THROWS_WITH(gpu_be().index_copy(view(out), 0, view(on_cuda(zeros({1, 1}, Options(kInt64)))),
                                         view(on_cuda(zeros({1, 4})))),
                    Catch::Contains("index_copy") && Catch::Contains("1-D"));
  const uint64_t syncs = kernels::cuda::sync_count();
  gpu_be().index_copy(view(out), 0, view(idx), view(on_cuda(ones({1, 4}))));
  gpu_be().index_copy(view(out), 0, view(on_cuda(index_tensor(repeating_ids(40, 3), kInt32))),
                       view(on_cuda(ones({40, 4}))));
  CHECK(kernels::cuda::sync_count() == syncs);
}

TEST_CASE("index_copy: the KV cache write captured once, replayed at every position", "[cuda][decode_kernels]") {
  // cache [B, Hkv, C, D] ← k_new [B, Hkv, 1, D] at dim 2, the position a [1] int64 tensor on the device;
  // and a 40-row write (the owner path, its scratch from the graph's pool) in the same graph.
  const int64_t B = 2, Hkv = 2, C = 9, D = 8;
  const Tensor cache_init = random_of({B, Hkv, C, D}, kBFloat16), big_init = random_of({50, 3}, kFloat32);
  Tensor cache = on_cuda(cache_init), big = on_cuda(big_init);
  Tensor position = on_cuda(index_tensor({0}, kInt64)), rows = on_cuda(index_tensor(repeating_ids(40, 50), kInt32));
  Tensor k_new = on_cuda(random_of({B, Hkv, 1, D}, kBFloat16)), big_src = on_cuda(random_of({40, 3}, kFloat32));
  auto g = kernels::capture_device_work(gpu_be(), [&] {
    index_copy_(cache, 2, position, k_new);
    index_copy_(big, 0, rows, big_src);
  });
  REQUIRE(g != nullptr);
  CHECK(elements_differing(cache, cache_init) == 0);  // recorded, not run
  Tensor want_cache = cache_init, want_big = big_init;
  for (int64_t pos : {0, 1, 5, 8, 3}) {
    INFO("position " << pos);
    position.fill_(double(pos));
    const Tensor fresh = random_of({B, Hkv, 1, D}, kBFloat16);
    k_new.copy_(on_cuda(fresh));
    std::vector<int64_t> ids = repeating_ids(40, 50);
    for (int64_t& id : ids) id = (id + pos) % 50;
    rows.copy_(on_cuda(index_tensor(ids, kInt32)));
    g->replay();
    want_cache = host_index_copy(want_cache, 2, {pos}, fresh);
    want_big = host_index_copy(want_big, 0, ids, big_src);
    CHECK(elements_differing(cache, want_cache) == 0);
    CHECK(elements_differing(big, want_big) == 0);
  }
}

// ------------------------------------------------------------------------------------ causal_attention_prefix

namespace {

struct DecodeCase {
  int64_t B, H, Hkv, T, Tc, D;
  DType dtype;
};

// q, the cache k, v and its key count on cuda:0.
struct DecodeInputs {
  Tensor q, k, v;
};

DecodeInputs decode_inputs(const DecodeCase& c) {
  const Options opts(c.dtype == kFloat64 ? kFloat64 : kFloat32);
  const auto make = [&](const Shape& s) { return on_cuda(randn(s, opts).to(c.dtype)); };
  return {make({c.B, c.H, c.T, c.D}), make({c.B, c.Hkv, c.Tc, c.D}), make({c.B, c.Hkv, c.Tc, c.D})};
}

DType lse_dtype_of(DType t) { return t == kBFloat16 ? kFloat32 : t; }

// out [B, H, T, D] and lse [B, H, T] on cuda:0, pre-filled with 7 (a value no kernel writes by chance).
std::pair<Tensor, Tensor> decode_outputs(const DecodeCase& c) {
  return {full({c.B, c.H, c.T, c.D}, 7.0, Options(c.dtype).device(gpu())),
          full({c.B, c.H, c.T}, 7.0, Options(lse_dtype_of(c.dtype)).device(gpu()))};
}

Tensor key_count_on_gpu(int64_t L) { return on_cuda(from_vector<int64_t>({L}, {1})); }

std::string case_name(const DecodeCase& c, int64_t L) {
  return fmt::format("B {} H {} Hkv {} T {} Tc {} D {} {} L {}", c.B, c.H, c.Hkv, c.T, c.Tc, c.D, dtype_name(c.dtype),
                     L);
}

}  // namespace

TEST_CASE("causal_attention_prefix: bit for bit causal_attention on the narrowed cache (L > T), the CPU at L = T",
          "[cuda][decode_kernels]") {
  manual_seed(2323);
  for (DType dtype : {kFloat32, kFloat64, kBFloat16})
    for (int64_t D : {32, 64, 128})
      for (int64_t T : {1, 3}) {
        const DecodeCase c{2, 4, 2, T, 40, D, dtype};  // GQA: 2 query heads per kv head; 40 keys: two key tiles
        const DecodeInputs in = decode_inputs(c);
        const double scale = 1.0 / std::sqrt(double(D));
        // out: bf16 ≤ 2 ulp (float32 inside, summed in another order), float32/64 rounding; lse: float32/64 sums
        const double out_rtol = dtype == kBFloat16 ? 1.0 / 64 : dtype == kFloat32 ? 2e-5 : 1e-12;
        const double lse_tol = dtype == kFloat64 ? 1e-12 : 2e-5;
        for (int64_t L : {T, int64_t(21), c.Tc}) {
          INFO(case_name(c, L));
          auto [out, lse] = decode_outputs(c);
          const kernels::Bf16BridgeStats before = kernels::bf16_bridge_stats(gpu());
          gpu_be().causal_attention_prefix(view(out), view(lse), view(in.q), view(in.k), view(in.v),
                                           view(key_count_on_gpu(L)), scale);
          CHECK(kernels::bf16_bridge_stats(gpu()).since(before).total().widened_calls == 0);  // bf16: the kernel's own
          auto [want_out, want_lse] = decode_outputs(c);
          const Tensor k_first = in.k.narrow(2, 0, L), v_first = in.v.narrow(2, 0, L);
          gpu_be().causal_attention(view(want_out), view(want_lse), view(in.q), view(k_first), view(v_first), scale);
          if (L > T) {  // the same row-per-warp kernel with the same bounds
            CHECK(elements_differing(out, want_out) == 0);
            CHECK(elements_differing(lse, want_lse) == 0);
          } else {  // L = T: the narrowed call runs the blocked (or tensor-core) kernels, rounded differently
            // (bf16 on tensor cores rounds P to bf16 before P·V: test_cuda_flash_attention.cpp's TC tolerance)
            expect_close(want_out, out, out_rtol, dtype == kBFloat16 ? 3e-2 : out_rtol, "out at L = T");
            expect_close(want_lse, lse, lse_tol, lse_tol, "lse at L = T");
          }
          // and the CPU (float32 inside for bfloat16) on the narrowed cache
          const Tensor q_cpu = in.q.to(Device::cpu()), k_cpu = k_first.to(Device::cpu()),
                       v_cpu = v_first.to(Device::cpu());
          Tensor cpu_out = empty({c.B, c.H, T, D}, Options(dtype)), cpu_lse = empty({c.B, c.H, T}, Options(lse_dtype_of(dtype)));
          cpu_be().causal_attention(view(cpu_out), view(cpu_lse), view(q_cpu), view(k_cpu), view(v_cpu), scale);
          expect_close(cpu_out, out, out_rtol, dtype == kBFloat16 ? 1e-2 : out_rtol, "out against the CPU");
          expect_close(cpu_lse, lse, lse_tol, lse_tol, "lse against the CPU");
        }
      }
}

TEST_CASE("causal_attention_prefix: through the autograd op, strided q as nn/attention.cpp makes it",
          "[cuda][decode_kernels]") {
  manual_seed(77);
  const int64_t B = 1, H = 4, Hkv = 2, T = 1, Tc = 33, D = 64, L = 30;
  const Tensor qbuf = on_cuda(randn({B, T, H, D})), k = on_cuda(randn({B, Hkv, Tc, D})),
               v = on_cuda(randn({B, Hkv, Tc, D}));
  const Tensor q = qbuf.transpose(1, 2);  // [B, H, T, D], stored [B, T, H, D]
  NoGradGuard no_grad;
  const Tensor got = causal_attention(q, k, v, 0.125, key_count_on_gpu(L));
  const Tensor want = causal_attention(q, k.narrow(2, 0, L), v.narrow(2, 0, L), 0.125);
  CHECK(elements_differing(got, want) == 0);
}

TEST_CASE("causal_attention_prefix: the bfloat16 row-per-warp forward reads q, k, v as they are, with the bits of "
          "the float32 kernel on widened inputs",
          "[cuda][decode_kernels]") {
  manual_seed(4);
  for (int64_t D : {64, 160}) {  // decoding (T < 16 over a longer cache); D 160: the row-per-warp kernel at any T
    for (int64_t T : {1, 5}) {
      const DecodeCase c{1, 4, 2, T, 45, D, kBFloat16};
      INFO(case_name(c, c.Tc));
      const DecodeInputs in = decode_inputs(c);
      auto [out, lse] = decode_outputs(c);
      gpu_be().causal_attention(view(out), view(lse), view(in.q), view(in.k), view(in.v), 0.1);
      const Tensor q32 = in.q.to(kFloat32), k32 = in.k.to(kFloat32), v32 = in.v.to(kFloat32);
      Tensor out32 = empty({c.B, c.H, T, D}, Options(kFloat32).device(gpu())),
             lse32 = empty({c.B, c.H, T}, Options(kFloat32).device(gpu()));
      gpu_be().causal_attention(view(out32), view(lse32), view(q32), view(k32), view(v32), 0.1);
      CHECK(elements_differing(out, out32.to(kBFloat16)) == 0);
      CHECK(elements_differing(lse, lse32) == 0);
    }
  }
  // and no float32 copy of anything: a decode step over 1024 keys reads q, k, v and writes out as bfloat16 itself
  // (one kernel, its row buffers in shared memory), so it allocates no device memory at all
  const DecodeCase c{1, 4, 2, 1, 1024, 64, kBFloat16};
  const DecodeInputs in = decode_inputs(c);
  auto [out, lse] = decode_outputs(c);
  const Tensor key_count = key_count_on_gpu(1000);
  gpu_be().synchronize();
  const size_t before = kernels::cuda::memory_stats().allocated_bytes;
  kernels::cuda::reset_peak_memory_stats();
  gpu_be().causal_attention_prefix(view(out), view(lse), view(in.q), view(in.k), view(in.v), view(key_count), 0.1);
  gpu_be().causal_attention(view(out), view(lse), view(in.q), view(in.k), view(in.v), 0.1);
  const size_t scratch = kernels::cuda::memory_stats().peak_allocated_bytes - before;
  const size_t cache_as_float32 = size_t(in.k.numel()) * sizeof(float);
  INFO("scratch " << scratch << " bytes, k as float32 " << cache_as_float32);
  CHECK(scratch == 0);
}

TEST_CASE("causal_attention_prefix: a key count outside [T, Tc] is the one clear error, out and lse untouched",
          "[cuda][decode_kernels]") {
  manual_seed(5);
  for (DType dtype : {kFloat32, kBFloat16})
    for (int64_t T : {1, 3}) {
      const DecodeCase c{1, 2, 1, T, 12, 32, dtype};
      const DecodeInputs in = decode_inputs(c);
      for (int64_t L : {T - 1, c.Tc + 1}) {
        INFO(case_name(c, L));
        auto [out, lse] = decode_outputs(c);
        gpu_be().causal_attention_prefix(view(out), view(lse), view(in.q), view(in.k), view(in.v),
                                         view(key_count_on_gpu(L)), 0.2);
        CHECK_THROWS_WITH(gpu_be().synchronize(),
                          Catch::Contains("causal_attention_prefix") &&
                              Catch::Contains(fmt::format("key_count {} is outside [{}, {}]", L, T, c.Tc)));
        const auto [fresh_out, fresh_lse] = decode_outputs(c);
        CHECK(elements_differing(out, fresh_out) == 0);
        CHECK(elements_differing(lse, fresh_lse) == 0);
        CHECK_NOTHROW(gpu_be().synchronize());
      }
    }
  // host-side: the key count's dtype and size
  const DecodeCase c{1, 2, 1, 1, 12, 32, kFloat32};
  const DecodeInputs in = decode_inputs(c);
  auto [out, lse] = decode_outputs(c);
  CHECK_THROWS_WITH(gpu_be().causal_attention_prefix(view(out), view(lse), view(in.q), view(in.k), view(in.v),
                                                     view(on_cuda(from_vector<int32_t>({4}, {1}))), 0.2),
                    Catch::Contains("causal_attention_prefix") && Catch::Contains("key_count"));
  CHECK_THROWS_WITH(gpu_be().causal_attention_prefix(view(out), view(lse), view(in.q), view(in.k), view(in.v),
                                                     view(on_cuda(from_vector<int64_t>({4, 5}, {2}))), 0.2),
                    Catch::Contains("causal_attention_prefix") && Catch::Contains("key_count"));
}

TEST_CASE("causal_attention_prefix: captured once, replayed with the key count changed: each L's bits",
          "[cuda][decode_kernels]") {
  manual_seed(6);
  for (DType dtype : {kFloat32, kBFloat16}) {
    const DecodeCase c{2, 4, 2, 1, 70, 64, dtype};
    INFO(dtype_name(dtype));
    const DecodeInputs in = decode_inputs(c);
    Tensor key_count = key_count_on_gpu(2);
    auto [out, lse] = decode_outputs(c);
    const uint64_t syncs = kernels::cuda::sync_count();
    auto g = kernels::capture_device_work(gpu_be(), [&] {
      gpu_be().causal_attention_prefix(view(out), view(lse), view(in.q), view(in.k), view(in.v), view(key_count),
                                       0.125);
    });
    REQUIRE(g != nullptr);
    CHECK(kernels::cuda::sync_count() == syncs);
    const auto [fresh_out, fresh_lse] = decode_outputs(c);
    CHECK(elements_differing(out, fresh_out) == 0);  // recorded, not run
    Tensor previous;
    for (int64_t L : {2, 33, 70, 17}) {
      INFO("L " << L);
      key_count.fill_(double(L));
      g->replay();
      auto [want_out, want_lse] = decode_outputs(c);
      gpu_be().causal_attention(view(want_out), view(want_lse), view(in.q), view(in.k.narrow(2, 0, L)),
                                view(in.v.narrow(2, 0, L)), 0.125);
      CHECK(elements_differing(out, want_out) == 0);
      CHECK(elements_differing(lse, want_lse) == 0);
      if (previous.defined()) CHECK(elements_differing(out, previous) > 0);  // L mattered
      previous = out.clone();
    }
    // a bad count at replay: the error at the next check, out as the last good replay left it
    key_count.fill_(double(c.Tc + 5));
    g->replay();
    CHECK_THROWS_WITH(gpu_be().synchronize(), Catch::Contains("causal_attention_prefix"));
    CHECK(elements_differing(out, previous) == 0);
  }
}

// test_cuda_index_add.cpp — the deterministic CUDA index_add / scatter_add (kernels/cuda/index_add.cu):
// bitwise the CPU backend's result (the same summation order) and the same bits on every run, with heavily
// repeated indices and values whose sums depend on the order (1e8 beside 1: a test that could fail). On a
// real GPU the old atomicAdd kernels failed these; on the emulated device (HIP-CPU) atomics may happen to run
// in order, so there it is the order check below that shows the data is order-sensitive.
// Also: strided views and dim 1, empty index, V = 1, distinct ids, a large V (the scan), an out-of-range id
// (the device error record), a capture in a CUDA graph (no host synchronisation) replaying the eager bits.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "kernels/device_graph.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/same_bits.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
using testing::elements_differing;

namespace {

// A shuffled copy of ids (a fixed seed: the same order every run).
Tensor shuffled(std::vector<int64_t> ids, DType index_dtype) {
  std::mt19937 rng(11);
  std::shuffle(ids.begin(), ids.end(), rng);
  return from_vector<int64_t>(ids, {int64_t(ids.size())}).to(index_dtype);
}

// N = 4096 positions over 7 ids, id 3 at 2000 of them, the rest spread, in a shuffled order.
Tensor repeated_ids(DType index_dtype) {
  std::vector<int64_t> ids(4096);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i < 2000 ? 3 : int64_t(i % 7);
  return shuffled(std::move(ids), index_dtype);
}

// Values whose float sums depend on the order: N(0, 1) times 1e8 at a random half of the elements.
Tensor order_sensitive(const Shape& shape, DType t) {
  const Tensor big = lt(rand(shape, Options(kFloat64)), 0.5).to(kFloat64) * (1e8 - 1.0) + 1.0;
  return (randn(shape, Options(kFloat64)) * big).to(t);
}

// index_add on the CPU and twice on the GPU (from the same out); checks the three give the same bytes.
void check_index_add_bitwise(const Tensor& out_init, int dim, const Tensor& index, const Tensor& src,
                             const std::function<Tensor(const Tensor&)>& view_of, const std::string& what) {
  INFO(what);
  const Tensor out_cpu = out_init.clone();
  cpu_be().index_add(view(view_of(out_cpu)), dim, view(index), view(view_of(src)));
  const Tensor index_gpu = on_cuda(index), src_gpu = on_cuda(src);
  for (int run = 0; run < 2; ++run) {
    INFO("GPU run " << run);
    const Tensor out_gpu = on_cuda(out_init);
    gpu_be().index_add(view(view_of(out_gpu)), dim, view(index_gpu), view(view_of(src_gpu)));
    CHECK(elements_differing(out_gpu, out_cpu) == 0);
  }
}

const auto kSame = [](const Tensor& t) { return t; };

}  // namespace

TEST_CASE("index_add: heavily repeated ids give the CPU's bits, on every run", "[cuda][index_det]") {
  for (DType t : {kFloat32, kFloat64})
    for (DType it : {kInt64, kInt32}) {
      const Tensor index = repeated_ids(it);
      const Tensor src = order_sensitive({4096, 96}, t), out = order_sensitive({7, 96}, t);
      check_index_add_bitwise(out, 0, index, src, kSame, fmt::format("{} index {} dim 0", dtype_name(t), dtype_name(it)));
    }
}

TEST_CASE("index_add: the test data is order-sensitive (positions in another order change the bits)",
          "[cuda][index_det]") {
  // The same adds on the CPU in reversed position order must differ somewhere: otherwise the bitwise
  // checks above could not tell the CPU's order from any other.
  const Tensor index = repeated_ids(kInt64);
  const Tensor src = order_sensitive({4096, 96}, kFloat32), out = order_sensitive({7, 96}, kFloat32);
  const Tensor forward = out.clone(), backward = out.clone();
  cpu_be().index_add(view(forward), 0, view(index), view(src));
  const Tensor reversed = arange(4095, -1, -1, Options(kInt64));
  cpu_be().index_add(view(backward), 0, view(index_select(index, 0, reversed)), view(index_select(src, 0, reversed)));
  CHECK(elements_differing(forward, backward) > 0);
}

TEST_CASE("index_add: dim 1, strided src and out, a strided index: the CPU's bits", "[cuda][index_det]") {
  for (DType t : {kFloat32, kFloat64}) {
    // out [3, 7, 5], src [3, 600, 5] as transposed views of [5, 7, 3] and [5, 600, 3]; index into dim 1
    const Tensor index_base = repeated_ids(kInt64).slice(0, 0, 1200, 1);  // 1200 ids, 3 repeated most
    const Tensor out_base = order_sensitive({5, 7, 3}, t), src_base = order_sensitive({5, 600, 3}, t);
    const Tensor index = index_base.slice(0, 0, 1200, 2);  // every other id: stride 2
    const auto transposed = [](const Tensor& x) { return x.transpose(0, 2); };
    check_index_add_bitwise(out_base, 1, index, src_base, transposed, fmt::format("{} transposed dim 1", dtype_name(t)));
    // the strided index itself on the GPU (a view of the GPU copy of its base)
    const Tensor out_cpu = out_base.clone(), out_gpu = on_cuda(out_base);
    cpu_be().index_add(view(transposed(out_cpu)), 1, view(index), view(transposed(src_base)));
    gpu_be().index_add(view(transposed(out_gpu)), 1, view(on_cuda(index_base).slice(0, 0, 1200, 2)),
                       view(transposed(on_cuda(src_base))));
    CHECK(elements_differing(out_gpu, out_cpu) == 0);
  }
}

TEST_CASE("index_add: empty index, V = 1, distinct ids, a large V, integers", "[cuda][index_det]") {
  {  // empty: out unchanged
    const Tensor out = randn({4, 3}), out_gpu = on_cuda(out);
    gpu_be().index_add(view(out_gpu), 0, view(on_cuda(zeros({0}, Options(kInt64)))), view(on_cuda(zeros({0, 3}))));
    CHECK(elements_differing(out_gpu, out) == 0);
  }
  {  // V = 1: every position into the one row
    const Tensor src = order_sensitive({777, 9}, kFloat32), out = order_sensitive({1, 9}, kFloat32);
    check_index_add_bitwise(out, 0, zeros({777}, Options(kInt32)), src, kSame, "V = 1");
  }
  {  // all ids distinct (a permutation): one position per bucket
    const Tensor src = order_sensitive({50, 8}, kFloat64), out = order_sensitive({64, 8}, kFloat64);
    std::vector<int64_t> ids(64);
    std::iota(ids.begin(), ids.end(), int64_t{0});
    check_index_add_bitwise(out, 0, shuffled(ids, kInt64).slice(0, 0, 50, 1), src, kSame, "distinct ids");
  }
  {  // V = 100003 (the scan's threads take 98 counts each), 5000 positions, Zipf-like repeats
    const Tensor u = rand({5000}, Options(kFloat64));
    const Tensor index = (u * u * u * u * 100003.0).to(kInt64);  // truncated: in [0, 100003), crowded near 0
    const Tensor src = order_sensitive({5000, 4}, kFloat32), out = order_sensitive({100003, 4}, kFloat32);
    check_index_add_bitwise(out, 0, index, src, kSame, "V = 100003");
  }
  for (DType t : {kInt32, kInt64}) {  // integers: exact, also dim 1
    const Tensor index = repeated_ids(kInt64).slice(0, 0, 300, 1);
    const Tensor src = randint(-1000, 1000, {2, 300, 3}, Options(t)), out = randint(-5, 5, {2, 7, 3}, Options(t));
    check_index_add_bitwise(out, 1, index, src, kSame, fmt::format("{} dim 1", dtype_name(t)));
  }
}

TEST_CASE("index_add: an out-of-range id is the clear error, the good positions are added", "[cuda][index_det]") {
  for (int64_t bad : {7, -2}) {
    std::vector<int64_t> ids(300, 2);
    ids[123] = bad;
    const Tensor index = on_cuda(from_vector<int64_t>(ids, {300}));
    const Tensor out = on_cuda(zeros({7, 5}));
    gpu_be().index_add(view(out), 0, view(index), view(on_cuda(ones({300, 5}))));
    CHECK_THROWS_WITH(gpu_be().synchronize(), Catch::Contains("index_add") && Catch::Contains("out of range") &&
                                                  Catch::Contains(fmt::format("index {}", bad)) &&
                                                  Catch::Contains("element 123"));
    const std::vector<double> v = values(out);
    CHECK(v[2 * 5] == 299.0);
    CHECK(std::accumulate(v.begin(), v.end(), 0.0) == 299.0 * 5);
    CHECK_NOTHROW(gpu_be().synchronize());
  }
}

TEST_CASE("index_add: captured in a CUDA graph without a host synchronisation, replays the eager bits",
          "[cuda][index_det][graph]") {
  const Tensor index = on_cuda(repeated_ids(kInt64));
  const Tensor src = on_cuda(order_sensitive({4096, 16}, kFloat32)), init = order_sensitive({7, 16}, kFloat32);
  const Tensor eager = on_cuda(init);
  const uint64_t syncs = kernels::cuda::sync_count();
  gpu_be().index_add(view(eager), 0, view(index), view(src));
  CHECK(kernels::cuda::sync_count() == syncs);
  const Tensor captured = on_cuda(init);
  auto g = kernels::capture_device_work(gpu_be(), [&] { gpu_be().index_add(view(captured), 0, view(index), view(src)); });
  REQUIRE(g != nullptr);
  CHECK(elements_differing(captured, on_cuda(init)) == 0);  // recorded, not run
  g->replay();
  CHECK(elements_differing(captured, eager) == 0);
}

TEST_CASE("scatter_add: repeated indices give the CPU's bits on every run, every dim, strided", "[cuda][index_det]") {
  for (DType t : {kFloat32, kFloat64})
    for (int dim : {0, 1})
      for (bool transposed : {false, true}) {
        INFO(fmt::format("{} dim {}{}", dtype_name(t), dim, transposed ? " transposed" : ""));
        // out [6, 5], index/src [300, 4] (dim 0) or [5, 300] (dim 1): each column adds 300 values into 6 or 5 slots
        const Shape out_shape{6, 5};
        Shape index_shape = out_shape;
        index_shape[size_t(dim)] = 300;
        index_shape[size_t(1 - dim)] -= 1;
        const Tensor index = randint(0, out_shape[dim], index_shape, Options(kInt64));
        const auto maybe_t = [&](const Tensor& x) { return transposed ? x.t() : x; };
        const auto base_of = [&](const Shape& s) { return transposed ? Shape{s[1], s[0]} : s; };
        const Tensor src_base = order_sensitive(base_of(index_shape), t), out_base = order_sensitive(base_of(out_shape), t);
        const Tensor out_cpu = out_base.clone();
        cpu_be().scatter_add(view(maybe_t(out_cpu)), dim, view(index), view(maybe_t(src_base)));
        for (int run = 0; run < 2; ++run) {
          const Tensor out_gpu = on_cuda(out_base);
          gpu_be().scatter_add(view(maybe_t(out_gpu)), dim, view(on_cuda(index)), view(maybe_t(on_cuda(src_base))));
          CHECK(elements_differing(out_gpu, out_cpu) == 0);
        }
      }
}

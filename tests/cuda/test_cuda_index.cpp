// test_cuda_index.cpp — CudaBackend index_select / index_add / gather / scatter_add against the CPU
// backend: every dim of 2-D and 3-D tensors, Int32 and Int64 indices, every dtype the CPU takes,
// repeated indices (the adds accumulate them), strided (transposed, sliced) operands and outputs,
// empty indices; a bad index raises tapegrad::Error at the next synchronisation, naming the op.
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

const DType kAllTypes[] = {kFloat32, kFloat64, kInt32, kInt64, kBool};
const DType kAddTypes[] = {kFloat32, kFloat64, kInt32, kInt64};
const DType kIndexTypes[] = {kInt64, kInt32};

// Random values of dtype t (small integers for the integer types, 0/1 for bool).
Tensor random_of(DType t, const Shape& shape) {
  if (t == kFloat32 || t == kFloat64) return randn(shape, Options(t));
  if (t == kBool) return randint(0, 2, shape, Options(kInt64)).to(kBool);
  return randint(-50, 50, shape, Options(t));
}

// The tolerance of a comparison: integer/bool exact, floats by dtype.
void expect_same(const Tensor& want, const Tensor& got, const std::string& what) {
  const DType t = want.dtype();
  const bool fp = t == kFloat32 || t == kFloat64;
  expect_close(want, got, fp ? rtol_for(t) : 0.0, fp ? atol_for(t) : 0.0, what);
}

std::string describe(const char* op, DType t, DType it, int dim, const Shape& shape) {
  return fmt::format("{} {} index {} dim {} shape {}", op, t, it, dim, shape);
}

// The same view of a base tensor on both devices: a transposed view when `transposed` (of a base
// whose first and last dims are swapped), else the base itself.
Tensor maybe_transposed(const Tensor& base, bool transposed) {
  return transposed ? base.transpose(0, base.dim() - 1) : base;
}
Shape swap_first_last(Shape s) {
  std::swap(s[0], s[s.size() - 1]);
  return s;
}

}  // namespace

TEST_CASE("index: index_select along every dim, every dtype, both index dtypes", "[cuda][index]") {
  const Shape shapes[] = {{37, 5}, {4, 7, 9}, {1, 300}};
  for (const Shape& in_shape : shapes)
    for (int dim = 0; dim < in_shape.size(); ++dim)
      for (DType t : kAllTypes)
        for (DType it : kIndexTypes)
          for (bool transposed : {false, true}) {
            const int64_t n_index = 11;  // more than some dims: repeats
            const Tensor index = randint(0, in_shape[dim], {n_index}, Options(it));
            Shape out_shape = in_shape;
            out_shape[dim] = n_index;
            // in and out may be transposed views (strided) of their bases
            const Tensor in_base = random_of(t, transposed ? swap_first_last(in_shape) : in_shape);
            const Tensor out_init = random_of(t, transposed ? swap_first_last(out_shape) : out_shape);
            const Tensor out_cpu_base = out_init.clone(), out_gpu_base = on_cuda(out_init);
            const Tensor in_cpu = maybe_transposed(in_base, transposed),
                         in_gpu = maybe_transposed(on_cuda(in_base), transposed);
            cpu_be().index_select(view(maybe_transposed(out_cpu_base, transposed)), view(in_cpu), dim, view(index));
            gpu_be().index_select(view(maybe_transposed(out_gpu_base, transposed)), view(in_gpu), dim,
                                  view(on_cuda(index)));
            expect_same(out_cpu_base, out_gpu_base,
                        describe("index_select", t, it, dim, in_shape) + (transposed ? " transposed" : ""));
          }
}

TEST_CASE("index: index_select with a strided index, a 0-d index and an empty index", "[cuda][index]") {
  const Tensor in = randn({6, 8}, Options(kFloat32));
  const Tensor index_base = tensor({5, 0, 3, 3, 1, 2, 4, 0}, {8}, Options(kInt64));
  // every other element of the index (stride 2)
  const Tensor index = index_base.slice(0, 0, 8, 2);
  Tensor out_cpu = zeros({6, 4}), out_gpu = on_cuda(zeros({6, 4}));
  cpu_be().index_select(view(out_cpu), view(in), 1, view(index));
  gpu_be().index_select(view(out_gpu), view(on_cuda(in)), 1, view(on_cuda(index_base).slice(0, 0, 8, 2)));
  expect_same(out_cpu, out_gpu, "strided index");

  const Tensor scalar = scalar_tensor(4, Options(kInt32));
  Tensor o1_cpu = zeros({1, 8}), o1_gpu = on_cuda(zeros({1, 8}));
  cpu_be().index_select(view(o1_cpu), view(in), 0, view(scalar));
  gpu_be().index_select(view(o1_gpu), view(on_cuda(in)), 0, view(on_cuda(scalar)));
  expect_same(o1_cpu, o1_gpu, "0-d index");

  const Tensor none = zeros({0}, Options(kInt64));
  Tensor o0 = on_cuda(zeros({0, 8}));
  gpu_be().index_select(view(o0), view(on_cuda(in)), 0, view(on_cuda(none)));
  CHECK(values(o0).empty());
}

TEST_CASE("index: index_add accumulates repeated indices, every dim, dtypes and index dtypes", "[cuda][index]") {
  const Shape shapes[] = {{9, 6}, {3, 5, 4}, {2, 257}};
  for (const Shape& out_shape : shapes)
    for (int dim = 0; dim < out_shape.size(); ++dim)
      for (DType t : kAddTypes)
        for (DType it : kIndexTypes)
          for (bool transposed : {false, true}) {
            // 40 indices into a dim of 2..9: every index repeats several times
            const int64_t n_index = 40;
            const Tensor index = randint(0, out_shape[dim], {n_index}, Options(it));
            Shape src_shape = out_shape;
            src_shape[dim] = n_index;
            const Tensor src_base = random_of(t, transposed ? swap_first_last(src_shape) : src_shape);
            const Tensor out_init = random_of(t, transposed ? swap_first_last(out_shape) : out_shape);
            const Tensor out_cpu_base = out_init.clone(), out_gpu_base = on_cuda(out_init);
            cpu_be().index_add(view(maybe_transposed(out_cpu_base, transposed)), dim, view(index),
                               view(maybe_transposed(src_base, transposed)));
            gpu_be().index_add(view(maybe_transposed(out_gpu_base, transposed)), dim, view(on_cuda(index)),
                               view(maybe_transposed(on_cuda(src_base), transposed)));
            expect_same(out_cpu_base, out_gpu_base,
                        describe("index_add", t, it, dim, out_shape) + (transposed ? " transposed" : ""));
          }
}

TEST_CASE("index: index_add of one row many times (the embedding backward of a repeated token)", "[cuda][index]") {
  // 500 additions of 1 into the same row: exact in float32, and wrong if any atomic add is lost.
  const Tensor index = full({500}, 2.0, Options(kInt32));  // every index is 2
  const Tensor src = ones({500, 33});
  Tensor out = on_cuda(zeros({4, 33}));
  gpu_be().index_add(view(out), 0, view(on_cuda(index)), view(on_cuda(src)));
  const std::vector<double> v = values(out);
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 33; ++c) CHECK(v[static_cast<size_t>(r * 33 + c)] == (r == 2 ? 500.0 : 0.0));
}

TEST_CASE("index: gather along every dim, every dtype, index smaller than the input", "[cuda][index]") {
  const Shape shapes[] = {{6, 9}, {3, 4, 5}, {1, 130}};
  for (const Shape& in_shape : shapes)
    for (int dim = 0; dim < in_shape.size(); ++dim)
      for (DType t : kAllTypes)
        for (DType it : kIndexTypes)
          for (bool transposed : {false, true}) {
            // index: in's shape with dim resized to 7, and (2-D and up) the last other dim one smaller
            Shape index_shape = in_shape;
            index_shape[dim] = 7;
            const int other = dim == in_shape.size() - 1 ? 0 : in_shape.size() - 1;
            if (index_shape[other] > 1) index_shape[other] -= 1;
            const Tensor index = randint(0, in_shape[dim], index_shape, Options(it));
            const Tensor in_base = random_of(t, transposed ? swap_first_last(in_shape) : in_shape);
            const Tensor out_init = random_of(t, transposed ? swap_first_last(index_shape) : index_shape);
            const Tensor out_cpu_base = out_init.clone(), out_gpu_base = on_cuda(out_init);
            cpu_be().gather(view(maybe_transposed(out_cpu_base, transposed)), view(maybe_transposed(in_base, transposed)),
                            dim, view(index));
            gpu_be().gather(view(maybe_transposed(out_gpu_base, transposed)),
                            view(maybe_transposed(on_cuda(in_base), transposed)), dim, view(on_cuda(index)));
            expect_same(out_cpu_base, out_gpu_base,
                        describe("gather", t, it, dim, in_shape) + (transposed ? " transposed" : ""));
          }
}

TEST_CASE("index: gather with a transposed index", "[cuda][index]") {
  const Tensor in = randn({5, 8}, Options(kFloat64));
  const Tensor index_base = randint(0, 8, {6, 5}, Options(kInt64));  // index = its transpose [5, 6]
  Tensor out_cpu = zeros({5, 6}, Options(kFloat64)), out_gpu = on_cuda(out_cpu);
  cpu_be().gather(view(out_cpu), view(in), 1, view(index_base.t()));
  gpu_be().gather(view(out_gpu), view(on_cuda(in)), 1, view(on_cuda(index_base).t()));
  expect_same(out_cpu, out_gpu, "gather, transposed index");
}

TEST_CASE("index: scatter_add accumulates repeated indices, every dim and dtype", "[cuda][index]") {
  const Shape shapes[] = {{5, 9}, {3, 4, 5}, {2, 140}};
  for (const Shape& out_shape : shapes)
    for (int dim = 0; dim < out_shape.size(); ++dim)
      for (DType t : kAddTypes)
        for (DType it : kIndexTypes)
          for (bool transposed : {false, true}) {
            // index: out's shape with dim grown to 13 (repeats), the last other dim one smaller
            Shape index_shape = out_shape;
            index_shape[dim] = 13;
            const int other = dim == out_shape.size() - 1 ? 0 : out_shape.size() - 1;
            if (index_shape[other] > 1) index_shape[other] -= 1;
            const Tensor index = randint(0, out_shape[dim], index_shape, Options(it));
            const Tensor src_base = random_of(t, transposed ? swap_first_last(index_shape) : index_shape);
            const Tensor out_init = random_of(t, transposed ? swap_first_last(out_shape) : out_shape);
            const Tensor out_cpu_base = out_init.clone(), out_gpu_base = on_cuda(out_init);
            cpu_be().scatter_add(view(maybe_transposed(out_cpu_base, transposed)), dim, view(index),
                                 view(maybe_transposed(src_base, transposed)));
            gpu_be().scatter_add(view(maybe_transposed(out_gpu_base, transposed)), dim, view(on_cuda(index)),
                                 view(maybe_transposed(on_cuda(src_base), transposed)));
            expect_same(out_cpu_base, out_gpu_base,
                        describe("scatter_add", t, it, dim, out_shape) + (transposed ? " transposed" : ""));
          }
}

TEST_CASE("index: scatter_add of every element into one position", "[cuda][index]") {
  const Tensor src = ones({3, 400}, Options(kInt64));
  const Tensor index = zeros({3, 400}, Options(kInt32));
  Tensor out = on_cuda(zeros({3, 2}, Options(kInt64)));
  gpu_be().scatter_add(view(out), 1, view(on_cuda(index)), view(on_cuda(src)));
  CHECK(values(out) == std::vector<double>{400, 0, 400, 0, 400, 0});
}

TEST_CASE("index: bool adds and non-integer indices throw at once", "[cuda][index]") {
  const Tensor b = on_cuda(zeros({4, 3}, Options(kBool)));
  const Tensor idx = on_cuda(zeros({4}, Options(kInt64)));
  CHECK_THROWS_WITH(gpu_be().index_add(view(b), 0, view(idx), view(b)), Catch::Contains("index_add"));
  const Tensor idx2 = on_cuda(zeros({4, 3}, Options(kInt64)));
  CHECK_THROWS_WITH(gpu_be().scatter_add(view(b), 0, view(idx2), view(b)), Catch::Contains("scatter_add"));
  const Tensor f = on_cuda(zeros({4, 3}));
  const Tensor fidx = on_cuda(zeros({4}));
  CHECK_THROWS_WITH(gpu_be().index_select(view(f), view(f), 0, view(fidx)), Catch::Contains("index dtype"));
}

TEST_CASE("index: a bad index raises at the next synchronisation, naming the op", "[cuda][index]") {
  const Tensor in = on_cuda(randn({5, 4}));
  for (DType it : kIndexTypes)
    for (double bad : {5.0, -1.0}) {
      const Tensor index = on_cuda(tensor({1, bad, 2}, {3}, Options(it)));
      const Tensor index2 = on_cuda(tensor({0, 1, 2, 3, 1, bad, 2, 0}, {2, 4}, Options(it)));
      INFO(fmt::format("index {} value {}", it, bad));
      {
        Tensor out = on_cuda(zeros({3, 4}));
        gpu_be().index_select(view(out), view(in), 0, view(index));
        CHECK_THROWS_WITH(values(out), Catch::Contains("index_select") && Catch::Contains("out of range"));
      }
      {
        Tensor out = on_cuda(zeros({5, 4}));
        gpu_be().index_add(view(out), 0, view(index), view(on_cuda(ones({3, 4}))));
        CHECK_THROWS_WITH(gpu_be().synchronize(), Catch::Contains("index_add"));
        // the good rows were added, the bad one skipped (and the record was cleared by the throw)
        const std::vector<double> v = values(out);
        CHECK(v[1 * 4] == 1.0);
        CHECK(v[2 * 4] == 1.0);
      }
      {
        Tensor out = on_cuda(zeros({2, 4}));
        gpu_be().gather(view(out), view(in), 0, view(index2));
        CHECK_THROWS_WITH(values(out), Catch::Contains("gather") && Catch::Contains("out of range"));
      }
      {
        Tensor out = on_cuda(zeros({5, 4}));
        gpu_be().scatter_add(view(out), 0, view(index2), view(on_cuda(ones({2, 4}))));
        CHECK_THROWS_WITH(gpu_be().synchronize(), Catch::Contains("scatter_add"));
        // index2 = [[0, 1, 2, 3], [1, bad, 2, 0]]: column 2 gets row 2 twice, column 1 only row 1
        const std::vector<double> v = values(out);
        CHECK(v[2 * 4 + 2] == 2.0);
        CHECK(v[1 * 4 + 1] == 1.0);
        CHECK(v[0 * 4 + 3] == 1.0);
      }
      // after a reported error the record is clear: the next sync does not throw again
      CHECK_NOTHROW(gpu_be().synchronize());
    }
}

// communicator.cpp — the single-process communicator and the checks every implementation shares.
#include "dist/communicator.h"

#include <cstdio>
#include <cstdlib>

namespace tapegrad::dist {

namespace {
class DoneWork : public Work {
 public:
  void wait() override {}
};
}  // namespace

void check_collective_tensor(const char* op, const Tensor& t, ReduceOp reduce) {
  TG_CHECK(t.defined(), "{}: the tensor is undefined", op);
  TG_CHECK(t.is_contiguous(), "{}: the tensor of shape {} is not contiguous (call .contiguous() first)", op,
           t.shape());
  const DType d = t.dtype();
  TG_CHECK(d == kFloat32 || d == kFloat64 || d == kInt32 || d == kInt64,
           "{}: dtype {} is not supported (float32, float64, int32, int64)", op, d);
  TG_CHECK(reduce != ReduceOp::Mean || d == kFloat32 || d == kFloat64,
           "{}: the mean of a {} tensor is not an integer; use Sum", op, d);
}

std::unique_ptr<Work> SingleProcess::all_reduce_async(const Tensor& t, ReduceOp op) {
  check_collective_tensor("all_reduce", t, op);
  return std::make_unique<DoneWork>();
}

void SingleProcess::broadcast(Tensor& t, int root) {
  check_collective_tensor("broadcast", t, ReduceOp::Sum);
  TG_CHECK(root == 0, "broadcast: root {} is not a rank of a world of size 1", root);
}

void SingleProcess::abort(int exit_code) {
  std::fflush(nullptr);
  std::_Exit(exit_code);
}

}  // namespace tapegrad::dist

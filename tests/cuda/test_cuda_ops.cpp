// test_cuda_ops.cpp — every op of autograd/ops/ops.def on the CUDA backend, forward and backward,
// against the CPU backend, driven by the gradcheck samples (tests/gradcheck_samples.h): the same
// list that drives the float64 gradcheck, so an op added there is covered here with no extra work.
//
// For each sample: the inputs are made on the CPU, copied to cuda:0 (keeping requires_grad), the
// sample's function runs on both devices, and the outputs and every input's gradient (from the
// same random upstream gradient) are compared — float64 within 1e-12 relative, and again with
// the inputs converted to float32 within 1e-5. A sample whose function creates a tensor on the
// CPU while its inputs are on the GPU fails here with a device-mismatch error: new tensors must
// follow their inputs' device. Then the float64 gradcheck itself runs with the inputs on the GPU.
#include <functional>
#include <set>

#include "tests/cuda/cuda_test_util.h"
#include "tests/gradcheck_samples.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
using gradcheck_samples::Inputs;
using gradcheck_samples::Sample;

namespace {

const std::vector<Sample>& samples() {
  static const std::vector<Sample> s = gradcheck_samples::all_samples();
  return s;
}
std::string label(const Sample& s) { return s.op + ": " + s.what; }
uint64_t seed_of(const Sample& s) {  // FNV-1a of the label, as the gradcheck suite does
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : label(s)) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Inputs converted to dtype `t` (floating ones only) on `device`, keeping requires_grad; leaves.
Inputs convert(const Inputs& in, DType t, Device device) {
  Inputs out;
  for (const Tensor& x : in) {
    Tensor y = x.detach();
    if (is_floating(y.dtype())) y = y.to(t);
    y = y.to(device).contiguous();
    if (y.device() == x.device() && y.dtype() == x.dtype()) y = y.clone();  // own storage, a fresh leaf
    if (x.requires_grad()) y.requires_grad_(true);
    out.push_back(y);
  }
  return out;
}

// Runs s.fn on `inputs`, backward with `upstream` (on the output's device); returns the output
// and the gradients of the inputs that require grad.
std::vector<Tensor> run(const Sample& s, const Inputs& inputs, const Tensor& upstream_cpu) {
  Tensor out = s.fn(inputs);
  std::vector<Tensor> results{out.detach()};
  if (out.requires_grad()) {
    out.backward(upstream_cpu.to(out.dtype()).to(out.device()));
    for (const Tensor& x : inputs)
      if (x.requires_grad()) results.push_back(x.grad().defined() ? x.grad() : zeros_like(x));
  }
  return results;
}

void compare_sample(const Sample& s, DType t) {
  Generator gen(seed_of(s));
  const Inputs base = s.make(gen);
  const Inputs on_cpu = convert(base, t, Device::cpu());
  const Inputs on_gpu = convert(base, t, gpu());
  // The upstream gradient: the output's shape, from a fixed seed.
  Tensor probe;
  {
    NoGradGuard no_grad;
    probe = s.fn(on_cpu);
  }
  Generator ugen(seed_of(s) ^ 0x9e3779b97f4a7c15ull);
  const Tensor upstream = randn(probe.shape(), Options(kFloat64), &ugen);
  const std::vector<Tensor> want = run(s, on_cpu, upstream);
  std::vector<Tensor> got;
  try {
    got = run(s, on_gpu, upstream);
  } catch (const std::exception& e) {
    FAIL_CHECK("on cuda:0 it threw: " << e.what());
    return;
  }
  REQUIRE(got.size() == want.size());
  CHECK(got[0].device() == gpu());
  for (size_t i = 0; i < want.size(); ++i) {
    // Integer outputs (argmax-like) must match exactly.
    const bool exact = !is_floating(want[i].dtype());
    const DType precision = s.float32_inside ? kFloat32 : t;  // the narrowest dtype the sample computes in
    expect_close(want[i], got[i], exact ? 0.0 : rtol_for(precision), exact ? 0.0 : atol_for(precision),
                 i == 0 ? "output" : "gradient of input #" + std::to_string(i - 1) + " (among those requiring grad)");
  }
}

}  // namespace

TEST_CASE("ops: every sample's forward and backward on cuda:0 match the CPU in float64", "[cuda][ops]") {
  std::set<std::string> covered;
  for (const Sample& s : samples()) {
    INFO("sample " << label(s));
    compare_sample(s, kFloat64);
    covered.insert(s.op);
  }
  // Every op of ops.def ran here (an op without a sample fails the gradcheck suite, and here).
  const std::vector<std::string> listed = {
#define TG_OP(name, family) #name,
#include "autograd/ops/ops.def"
#undef TG_OP
  };
  for (const std::string& op : listed) {
    INFO("op '" << op << "' of ops.def has no sample, so it never ran on cuda:0");
    CHECK(covered.count(op) == 1);
  }
}

TEST_CASE("ops: every sample's forward and backward on cuda:0 match the CPU in float32", "[cuda][ops]") {
  for (const Sample& s : samples()) {
    if (!s.f32) continue;
    INFO("sample " << label(s) << " (float32)");
    compare_sample(s, kFloat32);
  }
}

TEST_CASE("ops: the float64 gradcheck passes with every sample's inputs on cuda:0", "[cuda][ops][gradcheck]") {
  for (const Sample& s : samples()) {
    INFO("sample " << label(s));
    Generator gen(seed_of(s));
    const Inputs inputs = convert(s.make(gen), kFloat64, gpu());
    GradcheckResult r;
    try {
      r = gradcheck(s.fn, inputs, s.eps, s.atol, s.rtol);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << e.what());
      continue;
    }
    INFO(r.message);
    CHECK(r.ok);
  }
}

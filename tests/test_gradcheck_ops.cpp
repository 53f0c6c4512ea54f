// test_gradcheck_ops.cpp — proves every differentiable op's backward against finite differences.
//
// The op list is autograd/ops/ops.def; the samples (inputs + a function exercising each op) are in
// tests/gradcheck_samples.h. The suite fails when
//   * an op of ops.def has no sample,
//   * a sample's analytic gradient (backward) disagrees with central differences in float64,
//   * a sample records a tape entry that ops.def does not list, or a listed primitive is never
//     recorded by any sample (so it was never checked),
//   * float32 gradients drift from the float64 ones,
// and it checks that gradcheck itself notices a deliberately wrong backward.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/tapegrad.h"
#include "gradcheck_samples.h"

using namespace tapegrad;
using gradcheck_samples::Inputs;
using gradcheck_samples::Sample;

namespace {

struct OpEntry {
  std::string name, family;
};

// THE op list, straight from ops.def.
const std::vector<OpEntry>& listed_ops() {
  static const std::vector<OpEntry> ops = {
#define TG_OP(name, family) {#name, #family},
#include "autograd/ops/ops.def"
#undef TG_OP
  };
  return ops;
}

const std::vector<Sample>& samples() {
  static const std::vector<Sample> s = gradcheck_samples::all_samples();
  return s;
}

std::string label(const Sample& s) { return s.op + ": " + s.what; }

// A fixed seed per sample, from its description (FNV-1a): adding or reordering samples does not
// change the inputs of the others, and every run sees the same numbers.
uint64_t seed_of(const Sample& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : label(s)) h = (h ^ c) * 1099511628211ull;
  return h;
}

Inputs make_inputs(const Sample& s) {
  Generator gen(seed_of(s));
  return s.make(gen);
}

std::vector<double> grad_values(const Tensor& x) {
  return x.grad().defined() ? x.grad().to_vector<double>() : std::vector<double>(x.numel(), 0.0);
}

}  // namespace

TEST_CASE("gradcheck: every op listed in ops.def has a sample", "[gradcheck]") {
  REQUIRE(!listed_ops().empty());
  std::set<std::string> listed, sampled;
  for (const OpEntry& op : listed_ops()) listed.insert(op.name);
  for (const Sample& s : samples()) sampled.insert(s.op);
  for (const OpEntry& op : listed_ops()) {
    INFO("op '" << op.name << "' (family " << op.family << ") is listed in ops.def but has no gradcheck sample");
    CHECK(sampled.count(op.name) == 1);
  }
  // The other way round: a sample filed under a name ops.def does not list checks nothing the
  // list promises (a typo, or an op removed from the list).
  for (const Sample& s : samples()) {
    INFO("sample '" << label(s) << "' is filed under an op that ops.def does not list");
    CHECK(listed.count(s.op) == 1);
  }
}

TEST_CASE("gradcheck: every sample's backward matches finite differences in float64", "[gradcheck]") {
  for (const Sample& s : samples()) {
    INFO("sample " << label(s));
    const Inputs inputs = make_inputs(s);
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

TEST_CASE("gradcheck: the samples' tape entries are exactly the primitives of ops.def", "[gradcheck]") {
  std::map<std::string, std::string> family;
  for (const OpEntry& op : listed_ops()) family[op.name] = op.family;
  std::set<std::string> seen;
  for (const Sample& s : samples()) {
    INFO("sample " << label(s));
    const Inputs inputs = make_inputs(s);
    Tensor out;
    try {
      out = s.fn(inputs);
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << e.what());
      continue;
    }
    CHECK(out.requires_grad());  // else nothing was recorded and nothing was checked
    std::set<std::string> names;
    for (const Node* n : tape_entries(out)) names.insert(n->name());
    for (const std::string& name : names) {
      const auto it = family.find(name);
      if (it == family.end()) {
        // Recorded but not listed: a new primitive that forgot to be added to ops.def.
        FAIL_CHECK("tape entry '" << name << "' is recorded, but ops.def does not list it");
      } else if (it->second == "composite") {
        // Recorded under a name ops.def calls a composition: the list's family is wrong.
        FAIL_CHECK("ops.def lists '" << name << "' as composite, but it records its own tape entry");
      }
    }
    // A sample filed under a primitive must actually record it (e.g. contiguous() of an
    // already-contiguous tensor records nothing, and would check nothing).
    if (family.count(s.op) && family[s.op] != "composite") {
      INFO("the sample does not record its own op '" << s.op << "'");
      CHECK(names.count(s.op) == 1);
    }
    seen.insert(names.begin(), names.end());
  }
  for (const OpEntry& op : listed_ops()) {
    if (op.family == "composite") continue;
    INFO("primitive '" << op.name << "' is listed in ops.def but no sample records it");
    CHECK(seen.count(op.name) == 1);
  }
}

namespace {

// y = x², recorded by hand with a deliberately wrong backward (3g instead of 2x·g)…
Tensor bad_square(const Tensor& x) {
  Tensor y = mul(x.detach(), x.detach());
  if (needs_grad(x))
    record("bad_square", {&x}, y, [](const Tensor& g, GradInputs& dx) { dx[0] = g * 3.0; /* wrong: should be 2x */ });
  return y;
}

// …and with the right one.
Tensor good_square(const Tensor& x) {
  Tensor y = mul(x.detach(), x.detach());
  if (needs_grad(x))
    record("good_square", {&x}, y,
           [sx = SavedTensor(x)](const Tensor& g, GradInputs& dx) { dx[0] = g * sx.get() * 2.0; });
  return y;
}

}  // namespace

TEST_CASE("gradcheck: a wrong backward is caught, a right one passes", "[gradcheck]") {
  Generator gen(7);
  const Inputs x = {randn({2, 3}, Options(kFloat64).requires_grad(), &gen),
                    randn({2, 3}, Options(kFloat64).requires_grad(), &gen)};

  SECTION("wrong backward on input 0") {
    const GradcheckResult r = gradcheck([](const Inputs& in) { return bad_square(in[0]) + in[1]; }, x);
    INFO(r.message);
    CHECK_FALSE(r.ok);
    CHECK(r.input == 0);
    CHECK(r.message.find("FAILED") != std::string::npos);
    CHECK(r.message.find("input 0") != std::string::npos);
  }
  SECTION("wrong backward on input 1: the report names input 1") {
    const GradcheckResult r = gradcheck([](const Inputs& in) { return in[0] * 2.0 + bad_square(in[1]); }, x);
    INFO(r.message);
    CHECK_FALSE(r.ok);
    CHECK(r.input == 1);
    CHECK(r.message.find("input 1") != std::string::npos);
  }
  SECTION("the correct custom op passes") {
    const GradcheckResult r = gradcheck([](const Inputs& in) { return good_square(in[0]) * in[1]; }, x);
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.message.find("passed") != std::string::npos);
  }
}

namespace {

// The same leaves in float32 (same values rounded, same requires_grad, same memory layout: a
// transposed leaf stays transposed); index and mask tensors are shared as they are.
Inputs to_float32(const Inputs& xs) {
  Inputs out;
  for (const Tensor& x : xs) {
    if (x.dtype() != kFloat64) {
      out.push_back(x);
      continue;
    }
    // Convert in memory order (dims sorted by decreasing stride), then permute back.
    std::vector<int64_t> order(x.dim()), inverse(x.dim());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {  // stable: index tie-break
      return x.strides()[a] != x.strides()[b] ? x.strides()[a] > x.strides()[b] : a < b;
    });
    for (int d = 0; d < x.dim(); ++d) inverse[order[d]] = d;
    Tensor y = x.detach().permute(order).to(kFloat32).permute(inverse);
    y.requires_grad_(x.requires_grad());
    out.push_back(y);
  }
  return out;
}

struct Mismatch {
  bool ok = true;
  std::string where;
};

// |a − b| ≤ atol + rtol·|b| elementwise, b the float64 reference; reports the worst element.
Mismatch compare(const std::vector<double>& a, const std::vector<double>& b, double atol, double rtol) {
  Mismatch m;
  if (a.size() != b.size()) return {false, fmt::format("{} elements vs {}", a.size(), b.size())};
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double ratio = std::abs(a[i] - b[i]) / (atol + rtol * std::abs(b[i]));
    if (!(ratio <= 1.0) && (m.ok || ratio > worst)) {  // NaN counts as a failure
      m.ok = false;
      worst = ratio;
      m.where = fmt::format("element {}: float32 {:.8g} vs float64 {:.8g}", i, a[i], b[i]);
    }
  }
  return m;
}

}  // namespace

// Opted out (Sample::f32 = false): to_dtype's round trip, whose fn hard-codes float64 → float32 →
// float64 (with float32 inputs the first conversion is a no-op and the output is float64).
TEST_CASE("gradcheck: every sample also runs in float32, with gradients close to float64", "[gradcheck]") {
  constexpr double kAtol = 1e-4, kRtol = 1e-3;
  int ran = 0;
  for (const Sample& s : samples()) {
    if (!s.f32) continue;
    INFO("sample " << label(s));
    const Inputs x64 = make_inputs(s);
    const Inputs x32 = to_float32(x64);
    try {
      const Tensor y64 = s.fn(x64);
      const Tensor y32 = s.fn(x32);
      if (y32.dtype() != kFloat32 || y32.shape() != y64.shape()) {
        FAIL_CHECK(fmt::format("float32 inputs gave a {} {} output (float64 inputs: {} {}); if fn hard-codes "
                               "float64, set f32 = false on the sample",
                               y32.dtype(), y32.shape(), y64.dtype(), y64.shape()));
        continue;
      }
      {
        const Mismatch m = compare(y32.to_vector<double>(), y64.to_vector<double>(), kAtol, kRtol);
        INFO("forward values differ at " << m.where);
        CHECK(m.ok);
      }
      // A fixed random cotangent w: backward of Σ y·w sends w (not all-ones) into the graph.
      Generator wgen(seed_of(s) ^ 0x5eedc07a);
      const Tensor w = randn(y64.shape(), Options(kFloat64), &wgen);
      sum(y64 * w).backward();
      sum(y32 * w.to(kFloat32)).backward();
    } catch (const std::exception& e) {
      FAIL_CHECK("threw: " << e.what());
      continue;
    }
    for (size_t k = 0; k < x64.size(); ++k) {
      if (!x64[k].requires_grad()) continue;
      INFO("input " << k);
      CHECK(x32[k].is_contiguous() == x64[k].is_contiguous());  // to_float32 kept the layout
      CHECK((!x32[k].grad().defined() || x32[k].grad().dtype() == kFloat32));
      const Mismatch m = compare(grad_values(x32[k]), grad_values(x64[k]), kAtol, kRtol);
      INFO("gradients differ at " << m.where);
      CHECK(m.ok);
    }
    ++ran;
  }
  CHECK(ran > 0);
}

// generator.cpp — xoshiro256** (Blackman & Vigna, public domain algorithm), splitmix64 seeding,
// uniform doubles from the top 53 bits, Box–Muller normals (two per draw; the second is kept).
#include "autograd/generator.h"

#include <cmath>
#include <numbers>

namespace tapegrad {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

void Generator::manual_seed(uint64_t seed) {
  uint64_t x = seed;
  for (auto& v : state_.s) v = splitmix64(x);
  state_.has_spare = false;
  state_.spare = 0.0;
}

uint64_t Generator::next_u64() {
  auto& s = state_.s;
  const uint64_t result = rotl(s[1] * 5, 7) * 9;
  const uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double Generator::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Generator::normal() {
  if (state_.has_spare) {
    state_.has_spare = false;
    return state_.spare;
  }
  // Box–Muller: u1 in (0, 1] so log(u1) is finite.
  const double u1 = 1.0 - uniform(), u2 = uniform();
  const double r = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * std::numbers::pi * u2;
  state_.spare = r * std::sin(theta);
  state_.has_spare = true;
  return r * std::cos(theta);
}

uint64_t Generator::below(uint64_t n) {
  // Rejection sampling on the top of the range (Lemire's threshold).
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t x = next_u64();
    if (x >= threshold) return x % n;
  }
}

Generator& default_generator() {
  static Generator g;
  return g;
}
void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace tapegrad

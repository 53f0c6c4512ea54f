// generator.h — a seedable random generator that gives the same numbers on every machine:
// xoshiro256** (seeded through splitmix64) for bits, our own uniform and Box–Muller normal on
// top (std::*_distribution is implementation-defined, so it is not used). Its state can be
// saved and restored exactly (checkpoints).
#pragma once
#include <array>
#include <cstdint>

namespace tapegrad {

class Generator {
 public:
  struct State {
    std::array<uint64_t, 4> s{};
    bool has_spare = false;
    double spare = 0.0;
    friend bool operator==(const State&, const State&) = default;
  };

  explicit Generator(uint64_t seed = 0x7a9e6ad) { manual_seed(seed); }
  void manual_seed(uint64_t seed);
  uint64_t next_u64();
  double uniform();  // [0, 1) with 53 random bits
  double normal();   // N(0, 1)
  // Uniform integer in [0, n) without modulo bias.
  uint64_t below(uint64_t n);
  State state() const { return state_; }
  void set_state(const State& s) { state_ = s; }

 private:
  State state_;
};

// The generator used when an op is given none.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace tapegrad

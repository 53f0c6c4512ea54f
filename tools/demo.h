// demo.h — `tapegrad demo`: fit a small MLP to a noisy sine with the tape and plain gradient descent,
// show the tape of one step and gradcheck it in float64 (a smoke test of the whole autograd stack that
// needs no data; the learning path in docs/learn/ is the guided version).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "autograd/tensor.h"

namespace tapegrad::demo {

struct Config {
  int steps = 300;
  uint64_t seed = 1234;
  int hidden = 32;
  int points = 64;
  double lr = 0.1;
};

struct Result {
  double initial_loss = 0, final_loss = 0;
  std::string tape, dot;  // the tape of one training step, as text and as DOT
  bool gradcheck_ok = false;
  std::string gradcheck_message;
};

Result train_mlp(const Config& cfg, const std::function<void(int step, double loss)>& log);

// loss = Σ (tanh(w·x + b) − y)², small enough to read as a DOT picture.
Tensor example_expression();

}  // namespace tapegrad::demo

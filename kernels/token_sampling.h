// token_sampling.h — the options of a token drawn on a device (Backend::sample_token, autograd sample_token):
// lm::Sampler's options (lm/sampler.h) as the kernels see them.
#pragma once
#include <cstdint>

namespace tapegrad::kernels {

// greedy (or temperature 0) takes the argmax; else the softmax at `temperature`, cut to the top_k best (0: off)
// and then to the smallest prefix holding top_p of their mass (1: off), drawn by inverse CDF with one uniform.
struct TokenSampling {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  bool greedy = false;
};

}  // namespace tapegrad::kernels

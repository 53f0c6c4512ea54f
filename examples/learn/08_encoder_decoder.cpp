// 08_encoder_decoder.cpp — the learning path, chapter 8 (docs/learn/08_encoder_decoder.md): the
// classic encoder-decoder Transformer (nn/encoder_decoder.h) learns to reverse digit strings.
// It prints one padded batch and its masks, trains with teacher forcing, then decodes strings it
// never saw in training: greedily, and by sampling with a temperature and top-k.
//
// Tokens (source and target share them): PAD 0, BOS 1, EOS 2, digit d = 3 + d. Printed as
// '_' (PAD), '^' (BOS), '$' (EOS) and the digits:
//   source          3 1 4 $ _ _      the string, EOS, padding
//   decoder input   ^ 4 1 3 _ _      BOS, then the answer shifted right (teacher forcing)
//   target          4 1 3 $ _ _      the answer, EOS; PAD is ignored by the loss
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "autograd/tapegrad.h"
#include "nn/attention.h"
#include "nn/encoder_decoder.h"
#include "nn/loss.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"

using namespace tapegrad;

namespace {

constexpr int64_t kPad = 0, kBos = 1, kEos = 2, kVocab = 13;
constexpr int64_t kMinLen = 2, kMaxLen = 7;  // string lengths
constexpr int64_t kWidth = kMaxLen + 1;      // every row padded to the longest string + EOS
constexpr int64_t kSteps = 500, kBatch = 32, kPrintEvery = 100;

using Digits = std::vector<int64_t>;  // token ids 3..12

char symbol(int64_t id) {
  if (id == kPad) return '_';
  if (id == kBos) return '^';
  if (id == kEos) return '$';
  return static_cast<char>('0' + (id - 3));
}

std::string as_text(const Digits& ids) {
  std::string s;
  for (int64_t id : ids) s += symbol(id);
  return s;
}

Digits random_digits(Generator& gen) {
  const int64_t len = kMinLen + static_cast<int64_t>(gen.below(kMaxLen - kMinLen + 1));
  Digits d;
  for (int64_t i = 0; i < len; ++i) d.push_back(3 + static_cast<int64_t>(gen.below(10)));
  return d;
}

struct Batch {
  Tensor src, tgt_in, tgt_out;  // [B, W] each
};

// Source "d1 … dL EOS PAD…", decoder input "BOS dL … d1 PAD…", target "dL … d1 EOS PAD…".
Batch make_batch(const std::vector<Digits>& strings) {
  const int64_t n = static_cast<int64_t>(strings.size());
  std::vector<int64_t> src(n * kWidth, kPad), in(n * kWidth, kPad), out(n * kWidth, kPad);
  for (int64_t i = 0; i < n; ++i) {
    const Digits& s = strings[i];
    const int64_t L = static_cast<int64_t>(s.size());
    for (int64_t j = 0; j < L; ++j) {
      src[i * kWidth + j] = s[j];
      in[i * kWidth + 1 + j] = s[L - 1 - j];
      out[i * kWidth + j] = s[L - 1 - j];
    }
    src[i * kWidth + L] = kEos;
    in[i * kWidth] = kBos;
    out[i * kWidth + L] = kEos;
  }
  return {from_vector<int64_t>(src, {n, kWidth}), from_vector<int64_t>(in, {n, kWidth}),
          from_vector<int64_t>(out, {n, kWidth})};
}

void print_ids(const char* label, const Tensor& ids) {
  const int64_t B = ids.size(0), W = ids.size(1);
  const std::vector<int64_t> v = ids.to_vector<int64_t>();
  std::printf("  %-14s", label);
  for (int64_t b = 0; b < B; ++b) {
    std::printf("  ");
    for (int64_t j = 0; j < W; ++j) std::printf("%c", symbol(v[b * W + j]));
  }
  std::printf("\n");
}

// A 0/1 matrix [R, C], row-major.
void print_grid(const char* title, const std::vector<int64_t>& v, int64_t R, int64_t C) {
  std::printf("%s\n", title);
  for (int64_t r = 0; r < R; ++r) {
    std::printf("   ");
    for (int64_t c = 0; c < C; ++c) std::printf(" %lld", (long long)v[r * C + c]);
    std::printf("\n");
  }
}

void show_batch_and_masks(const nn::EncoderDecoder& model) {
  const std::vector<Digits> three = {{3 + 3, 3 + 1, 3 + 4}, {3 + 2, 3 + 7}, {3 + 9, 3 + 2, 3 + 6, 3 + 5, 3 + 3}};
  const Batch b = make_batch(three);
  const int64_t B = 3, T = kWidth;
  std::printf("one batch of B = 3 strings, padded to W = %lld ('_' PAD, '^' BOS, '$' EOS):\n", (long long)kWidth);
  print_ids("source", b.src);
  print_ids("decoder input", b.tgt_in);
  print_ids("target", b.tgt_out);
  // The masks the model builds: bool tensors, true (1) = a real token / may attend.
  const std::vector<int64_t> src_mask = model.padding_mask(b.src).to(kInt64).to_vector<int64_t>();    // [B, S]
  const std::vector<int64_t> tgt_mask = model.padding_mask(b.tgt_in).to(kInt64).to_vector<int64_t>(); // [B, T]
  const std::vector<int64_t> causal = nn::causal_mask(T).to(kInt64).to_vector<int64_t>();             // [T, T]
  print_grid("\nsource padding mask [B, S]: 1 = a real token (the encoder and cross-attention read only these)",
             src_mask, B, kWidth);
  print_grid("\ndecoder padding mask [B, T]: 1 = a real token of the decoder input", tgt_mask, B, T);
  print_grid("\ncausal mask [T, T]: row = query position, column = key position, 1 = may attend", causal, T, T);
  // What string 2's decoder self-attention uses: causal AND its padding mask (over the keys).
  std::vector<int64_t> both(static_cast<size_t>(T * T));
  for (int64_t q = 0; q < T; ++q)
    for (int64_t k = 0; k < T; ++k) both[q * T + k] = causal[q * T + k] * tgt_mask[1 * T + k];
  print_grid("\ndecoder self-attention mask of string 2 = causal AND its padding mask", both, T, T);
}

struct Decoded {
  std::vector<Digits> outputs;  // each row up to (not including) its EOS
  double exact = 0;             // fraction of rows equal to the reversed input, EOS included
};

Decoded score(const Tensor& produced, const std::vector<Digits>& inputs) {
  const int64_t n = produced.size(1);
  const std::vector<int64_t> p = produced.to_vector<int64_t>();
  Decoded d;
  int64_t right = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    Digits out;
    bool ended = false;
    for (int64_t j = 0; j < n && !ended; ++j) {
      const int64_t id = p[i * n + j];
      if (id == kEos) ended = true;
      else out.push_back(id);
    }
    Digits want(inputs[i].rbegin(), inputs[i].rend());
    right += ended && out == want;
    d.outputs.push_back(std::move(out));
  }
  d.exact = static_cast<double>(right) / static_cast<double>(inputs.size());
  return d;
}

void print_examples(const std::vector<Digits>& inputs, const Decoded& d, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const Digits want(inputs[i].rbegin(), inputs[i].rend());
    std::printf("    %-8s → %-8s %s\n", as_text(inputs[i]).c_str(), as_text(d.outputs[i]).c_str(),
                d.outputs[i] == want ? "right" : "WRONG");
  }
}

}  // namespace

int main() {
  try {
    set_num_threads(1);  // one thread: the same float rounding, so the same printed numbers, everywhere
    nn::EncoderDecoderConfig c;
    c.src_vocab_size = c.tgt_vocab_size = kVocab;
    c.max_len = kWidth + 1;
    c.d_model = 32;
    c.n_heads = 4;
    c.d_ff = 64;
    c.n_encoder_layers = 2;
    c.n_decoder_layers = 1;
    c.dropout = 0.0;
    c.norm_first = false;  // post-norm, as in the paper
    c.positional = nn::PositionalKind::Sinusoidal;
    c.pad_id = kPad;
    // float64: training is chaotic (a change in the 7th digit of one weight changes which strings a
    // float32 model gets wrong 500 steps later), and compilers and CPUs round float32 sums differently.
    // In float64 the rounding differences stay far too small to change any printed digit or token.
    c.dtype = kFloat64;
    Generator init(1234);
    nn::EncoderDecoder model(c, &init);
    std::printf("EncoderDecoder: %lld parameters (d_model 32, 4 heads, d_ff 64, 2 encoder layers, 1 decoder "
                "layer, post-norm, float64)\n\n",
                (long long)model.num_parameters());
    show_batch_and_masks(model);

    // Teacher forcing: the decoder reads the right answer shifted by one and predicts the next token
    // at every position at once; PAD positions add nothing to the loss.
    std::printf("\ntraining: %lld AdamW steps of %lld random strings of length %lld..%lld\n", (long long)kSteps,
                (long long)kBatch, (long long)kMinLen, (long long)kMaxLen);
    const double lr_max = 5e-3;
    optim::AdamW opt(model.parameters(), optim::AdamWOptions(lr_max).betas(0.9, 0.98).weight_decay(0.01));
    Generator data(2024);
    std::set<Digits> seen;  // every training string, so the test strings can be new ones
    model.train();
    for (int64_t step = 0; step < kSteps; ++step) {
      std::vector<Digits> strings;
      for (int64_t i = 0; i < kBatch; ++i) strings.push_back(random_digits(data));
      seen.insert(strings.begin(), strings.end());
      const Batch b = make_batch(strings);
      opt.set_lr(optim::cosine_lr(step, lr_max, lr_max / 10, kSteps / 10, kSteps));
      Tensor logits = model(b.src, b.tgt_in);                                   // [B, T, V]
      Tensor loss = nn::cross_entropy(logits, b.tgt_out, /*ignore_index=*/kPad);
      opt.zero_grad();
      loss.backward();
      opt.step();
      if ((step + 1) % kPrintEvery == 0)
        std::printf("  step %3lld  loss %.4f\n", (long long)step + 1, loss.item<double>());
    }

    // Held-out strings: drawn from another seed, keeping only strings never seen in training.
    model.eval();
    Generator held_out(777);
    std::vector<Digits> test;
    while (test.size() < 200) {
      Digits d = random_digits(held_out);
      if (!seen.count(d)) test.push_back(std::move(d));
    }
    const Tensor src = make_batch(test).src;
    std::printf("\n%zu held-out strings (none seen in training), max %lld new tokens each:\n", test.size(),
                (long long)kWidth);
    const Decoded greedy = score(model.greedy_decode(src, kBos, kEos, kWidth), test);
    std::printf("  greedy: exact match %.1f %%\n", 100 * greedy.exact);
    print_examples(test, greedy, 6);

    // Sampling: each run of sample_decode draws from its own generator, seeded 1, so it is repeatable.
    const auto sample = [&](double temperature, int64_t top_k) {
      Generator gen(1);
      return score(model.sample_decode(src, kBos, kEos, kWidth, nn::SamplingOptions{temperature, top_k}, gen), test);
    };
    for (const auto& [t, k] : std::vector<std::pair<double, int64_t>>{{0.5, 0}, {1.0, 0}, {2.0, 0}, {2.0, 2}}) {
      const Decoded d = sample(t, k);
      std::printf("  sampled, temperature %.1f, %s: exact match %.1f %%\n", t,
                  k == 0 ? "every token" : fmt::format("top-k {}", k).c_str(), 100 * d.exact);
    }
    std::printf("  sampled at temperature 2.0, every token:\n");
    print_examples(test, sample(2.0, 0), 6);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

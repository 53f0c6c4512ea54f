// progress.cpp — the training progress line (see progress.h).
#include "tools/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace tapegrad::cli {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = int64_t(std::llround(seconds));
  if (s >= 3600) return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
  return fmt::format("{}:{:02d}", s / 60, s % 60);
}

namespace {

std::string rate(double v) {
  if (v >= 1e6) return fmt::format("{:.2f}M", v / 1e6);
  if (v >= 1e4) return fmt::format("{:.1f}k", v / 1e3);
  return fmt::format("{:.0f}", v);
}

}  // namespace

ProgressLine::ProgressLine(double flops_per_token, double sgemm_gflops, int64_t print_every)
    : tty_(::isatty(STDOUT_FILENO) == 1),
      flops_per_token_(flops_per_token),
      sgemm_gflops_(sgemm_gflops),
      print_every_(std::max<int64_t>(print_every, 1)) {}

void ProgressLine::step(const lm::StepStats& s) {
  ema_weight_ = 0.9 * ema_weight_ + 0.1;
  ema_loss_ = 0.9 * ema_loss_ + 0.1 * s.loss;
  step_time_sum_ += s.step_seconds;
  ++steps_here_;
  if (!tty_ && s.step % print_every_ != 0 && s.step != s.steps) return;
  const double gflops = s.tokens_per_s * flops_per_token_ / 1e9;
  const std::string mfu = sgemm_gflops_ > 0 ? fmt::format(" ({:.0f}% of sgemm)", 100 * gflops / sgemm_gflops_) : "";
  const double eta = double(s.steps - s.step) * step_time_sum_ / double(steps_here_);
  const std::string line =
      fmt::format("step {}/{}  loss {:.4f}  lr {:.2e}  {} tok/s  {:.1f} GFLOP/s{}  {} / ETA {}", s.step, s.steps,
                  ema_loss_ / ema_weight_, s.lr, rate(s.tokens_per_s), gflops, mfu, format_duration(s.wall_s),
                  format_duration(eta));
  if (tty_) {
    std::fputs(("\r" + line + "\x1b[K").c_str(), stdout);
    live_ = true;
  } else {
    std::fputs((line + "\n").c_str(), stdout);
  }
  std::fflush(stdout);
}

void ProgressLine::eval(const lm::EvalStats& e) {
  const std::string bpb = e.result.bytes ? fmt::format("  {:.4f} bits/byte", e.result.bits_per_byte) : "";
  message(fmt::format("eval @ step {}: val loss {:.4f}  perplexity {:.2f}{}  ({} tokens, {:.1f} s){}", e.step,
                      e.result.loss, e.result.perplexity, bpb, e.result.tokens, e.seconds, e.best ? "  best" : ""));
  if (e.groups.empty()) return;
  std::string line = "  held-out loss by task:";
  for (const auto& [group, result] : e.groups) {
    // A system prompt as a group's name can be long: its first 24 characters (bytes) are enough to tell them apart.
    std::string name = group.empty() ? "(none)" : group.size() > 24 ? group.substr(0, 24) + "…" : group;
    line += fmt::format("  {} {:.4f} ({})", name, result.loss, result.windows);
  }
  message(line);
}

void ProgressLine::message(const std::string& line) {
  end_live_line();
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

void ProgressLine::finish() { end_live_line(); }

void ProgressLine::end_live_line() {
  if (live_) std::fputs("\n", stdout);
  live_ = false;
}

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

BytesProgress::BytesProgress(std::string label)
    : tty_(::isatty(STDERR_FILENO) == 1), label_(std::move(label)), start_(now_seconds()) {}

BytesProgress::~BytesProgress() {
  if (tty_ && live_) std::fputc('\n', stderr);
}

void BytesProgress::update(uint64_t bytes_done, uint64_t bytes_total) {
  done_ = bytes_done, total_ = std::max(bytes_total, bytes_done);
  const double now = now_seconds();
  if (tty_) {
    if (now - last_print_ < 0.1) return;
    last_print_ = now;
    print();
    return;
  }
  const int tenths = total_ > 0 ? int(10 * done_ / total_) : 0;
  if (tenths <= printed_tenths_ || now - start_ < 1.0) return;
  printed_tenths_ = tenths;
  print();
}

void BytesProgress::finish() {
  if (tty_ && live_) {
    print();
    std::fputc('\n', stderr);
    live_ = false;
  }
  std::fflush(stderr);
}

void BytesProgress::print() {
  const double elapsed = now_seconds() - start_;
  const double mb_done = double(done_) / 1e6, mb_total = double(total_) / 1e6;
  const double mb_per_s = elapsed > 0 ? mb_done / elapsed : 0;
  const std::string line =
      fmt::format("{}: {:.1f} / {:.1f} MB, {:.1f} MB/s, ETA {}", label_, mb_done, mb_total, mb_per_s,
                  mb_per_s > 0 ? format_duration((mb_total - mb_done) / mb_per_s) : "?");
  if (tty_) {
    fmt::print(stderr, "\r{:<72}", line);  // padded: a shorter line must cover the longer one before it
    live_ = true;
  } else {
    fmt::print(stderr, "{}\n", line);
  }
  std::fflush(stderr);
}

}  // namespace tapegrad::cli

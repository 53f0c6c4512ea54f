// progress.h — what a user sees while `tapegrad train` runs: one live line, rewritten in place on a
// terminal (plain lines every `print_every` steps when stdout is not a TTY), and a line per evaluation:
//   step 120/1000  loss 3.412  lr 9.8e-04  41.2k tok/s  36.6 GFLOP/s (24% of sgemm)  0:32 / ETA 3:55
//   eval @ step 200: val loss 3.2011  perplexity 24.56  (51,200 tokens, 1.2 s)  best
// The loss shown is an exponential moving average (α = 0.1, bias-corrected), the rates are this
// step's, the ETA comes from the average step time of this process.
#pragma once
#include <cstdint>
#include <string>

#include "lm/trainer.h"

namespace tapegrad::cli {

class ProgressLine {
 public:
  // flops_per_token: lm::flops_per_token(model config); sgemm_gflops: the ceiling (≤ 0: not shown).
  ProgressLine(double flops_per_token, double sgemm_gflops, int64_t print_every);
  void step(const lm::StepStats& s);
  void eval(const lm::EvalStats& e);
  void message(const std::string& line);  // ends the live line first
  void finish();                          // ends the live line

 private:
  void end_live_line();
  bool tty_;
  double flops_per_token_, sgemm_gflops_;
  int64_t print_every_;
  double ema_loss_ = 0, ema_weight_ = 0;
  double step_time_sum_ = 0;
  int64_t steps_here_ = 0;
  bool live_ = false;
};

// "1:02:03" / "4:05"; "?" when not finite or negative
std::string format_duration(double seconds);

// While text is tokenized, on stderr: "tokenizing: 12.3 / 45.6 MB, 8.1 MB/s, ETA 0:04". On a terminal
// the line is rewritten in place ('\r', at most 10 times a second); on a pipe or file a plain line is
// printed at each further 10 % of the bytes once the work has run a second (at most ~10 lines; a
// quick job prints none). finish() ends the live line.
class BytesProgress {
 public:
  explicit BytesProgress(std::string label = "tokenizing");
  ~BytesProgress();  // ends a live line left showing (an error is on its own line)
  BytesProgress(const BytesProgress&) = delete;
  BytesProgress& operator=(const BytesProgress&) = delete;
  void update(uint64_t bytes_done, uint64_t bytes_total);
  void finish();

 private:
  void print();
  bool tty_;
  std::string label_;
  double start_, last_print_ = 0;
  uint64_t done_ = 0, total_ = 0;
  int printed_tenths_ = 0;  // pipe: the last 10 % step printed
  bool live_ = false;       // terminal: a line is showing
};

}  // namespace tapegrad::cli

// metrics_log.h — DIR/metrics.jsonl: one JSON object per line, appended and flushed as training goes.
//   {"kind":"train","step":10,"tokens":20480,"wall_s":3.2,"loss":5.91,"lr":0.0003,"grad_norm":1.7,"tokens_per_s":6400}
//   {"kind":"eval","step":100,"tokens":204800,"wall_s":31.0,"val_loss":4.12,"val_perplexity":61.6,"val_tokens":51200,
//    "val_bpb":1.43}      (val_bpb: bits per byte, lm/bits_per_byte.h; only when the run knows its tokenizer)
// On resume from step S the lines after S (written by the interrupted run after its last
// checkpoint) are dropped, so the file always describes one consistent history.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tapegrad::lm {

struct MetricRecord {
  enum class Kind { Train, Eval } kind = Kind::Train;
  int64_t step = 0;
  uint64_t tokens = 0;   // training tokens seen after this step
  double wall_s = 0;     // training wall time so far (continues across resumes)
  // Train records
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0;
  // Eval records
  double val_loss = 0, val_perplexity = 0;
  uint64_t val_tokens = 0;
  double val_bpb = 0;    // bits per byte (0: not known; not written then)
  // --sft with examples of several tasks: each group's held-out loss ("val_loss_by_group": {"task": loss}).
  std::vector<std::pair<std::string, double>> val_loss_by_group;
};

std::string to_json_line(const MetricRecord& r);
// Throws tapegrad::Error when the line is not such an object.
MetricRecord from_json_line(const std::string& line);

class MetricsLog {
 public:
  // Opens `path` for appending. keep_until_step ≥ 0: keep the existing records with step ≤ it
  // (rewriting the file atomically without the rest, and without a torn last line); < 0: start empty.
  // A complete line that is not a record (damaged) is kept in the file as it is, left out of
  // records(), and counted in damaged_lines().
  MetricsLog(const std::string& path, int64_t keep_until_step);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void append(const MetricRecord& r);  // one line, flushed; throws naming the file on a write error
  const std::vector<MetricRecord>& records() const { return records_; }
  int64_t damaged_lines() const { return damaged_lines_; }

 private:
  struct Closer {
    void operator()(std::FILE* f) const { std::fclose(f); }
  };
  std::string path_;
  std::unique_ptr<std::FILE, Closer> file_;
  std::vector<MetricRecord> records_;
  int64_t damaged_lines_ = 0;
};

}  // namespace tapegrad::lm

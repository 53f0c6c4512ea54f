// metrics_log.cpp — metrics.jsonl writing and reading (see metrics_log.h).
#include "lm/metrics_log.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "kernels/error.h"
#include "data/file_io.h"
#include "lm/run_dir.h"

namespace tapegrad::lm {

std::string to_json_line(const MetricRecord& r) {
  nlohmann::ordered_json j;
  j["kind"] = r.kind == MetricRecord::Kind::Train ? "train" : "eval";
  j["step"] = r.step;
  j["tokens"] = r.tokens;
  j["wall_s"] = r.wall_s;
  if (r.kind == MetricRecord::Kind::Train) {
    j["loss"] = r.loss;
    j["lr"] = r.lr;
    j["grad_norm"] = r.grad_norm;
    j["tokens_per_s"] = r.tokens_per_s;
  } else {
    j["val_loss"] = r.val_loss;
    j["val_perplexity"] = r.val_perplexity;
    j["val_tokens"] = r.val_tokens;
    if (r.val_bpb > 0) j["val_bpb"] = r.val_bpb;
    if (!r.val_loss_by_group.empty()) {
      nlohmann::ordered_json groups = nlohmann::ordered_json::object();
      for (const auto& [group, loss] : r.val_loss_by_group) groups[group] = loss;
      j["val_loss_by_group"] = groups;
    }
  }
  return j.dump();  // non-finite numbers become null
}

MetricRecord from_json_line(const std::string& line) {
  // ordered: val_loss_by_group keeps the order it was written in
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false);
  TG_CHECK(j.is_object() && j.contains("kind") && j.contains("step"), "not a metrics record: '{}'", line);
  auto count = [&](const char* key) { return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0; };
  // null is how to_json_line writes a non-finite number: it reads back as NaN (loss_svg leaves it out), not 0.
  auto num = [&](const char* key) {
    return j.contains(key) && j[key].is_null() ? std::numeric_limits<double>::quiet_NaN() : count(key);
  };
  MetricRecord r;
  const std::string kind = j["kind"].is_string() ? j["kind"].get<std::string>() : "";
  TG_CHECK(kind == "train" || kind == "eval", "metrics record of unknown kind: '{}'", line);
  r.kind = kind == "train" ? MetricRecord::Kind::Train : MetricRecord::Kind::Eval;
  // A count must fit its integer type: converting a double outside it is undefined behaviour.
  auto whole = [&](const char* key, double lo, double hi) {
    const double v = count(key);
    TG_CHECK(v >= lo && v < hi, "metrics record: \"{}\" {} is out of range: '{}'", key, v, line);
    return v;
  };
  const double two63 = std::ldexp(1.0, 63), two64 = std::ldexp(1.0, 64);
  r.step = int64_t(whole("step", -two63, two63));
  r.tokens = uint64_t(whole("tokens", 0, two64));
  r.wall_s = num("wall_s");
  r.loss = num("loss");
  r.lr = num("lr");
  r.grad_norm = num("grad_norm");
  r.tokens_per_s = num("tokens_per_s");
  r.val_loss = num("val_loss");
  r.val_perplexity = num("val_perplexity");
  r.val_tokens = uint64_t(whole("val_tokens", 0, two64));
  r.val_bpb = num("val_bpb");
  if (j.contains("val_loss_by_group") && j["val_loss_by_group"].is_object())
    for (const auto& [group, loss] : j["val_loss_by_group"].items())
      r.val_loss_by_group.emplace_back(group, loss.is_number() ? loss.get<double>()
                                                               : std::numeric_limits<double>::quiet_NaN());
  return r;
}

MetricsLog::MetricsLog(const std::string& path, int64_t keep_until_step) : path_(path) {
  if (keep_until_step >= 0) {
    std::ifstream in(path);
    std::string line, kept;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // a last line without '\n' was torn by a kill: drop it
      try {
        MetricRecord r = from_json_line(line);
        if (r.step > keep_until_step) continue;
        records_.push_back(r);
        kept += line + "\n";
      } catch (const Error&) {
        // A damaged line in the middle (a disk error, a hand edit): not a record, so not in records(),
        // but its bytes are the user's: kept as they are, and counted.
        ++damaged_lines_;
        kept += line + "\n";
      }
    }
    data::write_file_atomic(path, kept, "metrics.jsonl");
  } else {
    data::write_file_atomic(path, "", "metrics.jsonl");
  }
  file_.reset(std::fopen(path.c_str(), "a"));
  TG_CHECK(file_ != nullptr, "cannot open '{}' for appending", path);
  // Unbuffered: a line that failed to append is not left in a buffer to be written at close.
  std::setvbuf(file_.get(), nullptr, _IONBF, 0);
}

MetricsLog::~MetricsLog() = default;

void MetricsLog::append(const MetricRecord& r) {
  const std::string line = to_json_line(r) + "\n";
  TG_CHECK(std::fwrite(line.data(), 1, line.size(), file_.get()) == line.size() && std::fflush(file_.get()) == 0,
           "cannot append to '{}' (disk full?)", path_);
  records_.push_back(r);
}

}  // namespace tapegrad::lm

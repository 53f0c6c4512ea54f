// test_lm_units.cpp — the lm/ layer through its library API (the tool's end-to-end runs are in
// test_tool_train.cpp): split_documents, MetricsLog and its JSON lines, loss_svg, the run
// directory (listing, pruning, prepare_run_dir), presets and flops_per_token, evaluate() against a
// hand-made computation, the Trainer (determinism, gradient accumulation, exact resume, refusals,
// divergence with and without anomaly detection, stop requests, pruning) and TrainOptions::validate.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "autograd/io/safetensors.h"
#include "autograd/tapegrad.h"
#include "lm/evaluate.h"
#include "lm/loss_plot.h"
#include "lm/metrics_log.h"
#include "lm/model_presets.h"
#include "lm/run_dir.h"
#include "lm/text_split.h"
#include "lm/trainer.h"
#include "nn/loss.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"
#include "optim/lr_schedule.h"
#include "test_data_helpers.h"
#include "xml_check.h"

using namespace tapegrad;
using tapegrad::data::testing::read_all;
using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
namespace fs = std::filesystem;

namespace {

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

std::vector<std::string> lines_of_file(const std::string& path) {
  std::vector<std::string> out;
  const std::string s = read_all(path);
  size_t start = 0;
  for (size_t nl = s.find('\n'); nl != std::string::npos; nl = s.find('\n', start)) {
    out.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

std::vector<uint32_t> random_tokens(size_t n, uint64_t vocab, uint64_t seed) {
  Generator g(seed);
  std::vector<uint32_t> v(n);
  for (auto& x : v) x = uint32_t(g.below(vocab));
  return v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// split_documents

TEST_CASE("split_documents: '<|endoftext|>' documents, the cut on a boundary, ceil(10 %) held out", "[lm]") {
  const std::string sep = "<|endoftext|>";
  for (size_t n = 2; n <= 31; ++n) {
    std::string text;
    for (size_t i = 0; i < n; ++i) text += fmt::format("story {} once upon a time.\n{}", i, sep);
    const lm::TextSplit s = lm::split_documents(text, sep);
    const size_t expected_val = std::min(std::max<size_t>((n + 9) / 10, 1), n - 1);  // ceil(n / 10) in [1, n-1]
    INFO(n << " documents");
    CHECK(s.val_documents == expected_val);
    CHECK(s.train_documents == n - expected_val);
    CHECK(std::string(s.train) + std::string(s.val) == text);
    CHECK(s.train.data() == text.data());  // views into the text
    // The cut is exactly where document n - val starts (its separator kept with the one before).
    CHECK(s.val.starts_with(fmt::format("story {} ", n - expected_val)));
    CHECK(s.train.ends_with(sep));
    CHECK(count_of(std::string(s.val), sep) == expected_val);
  }
  // A last document without a separator; another fraction.
  const std::string text = "a<|endoftext|>b<|endoftext|>c<|endoftext|>d";
  lm::TextSplit s = lm::split_documents(text, sep);
  CHECK(s.train == "a<|endoftext|>b<|endoftext|>c<|endoftext|>");
  CHECK(s.val == "d");
  s = lm::split_documents(text, sep, 0.5);
  CHECK(s.train == "a<|endoftext|>b<|endoftext|>");
  CHECK(s.val == "c<|endoftext|>d");
  CHECK(s.val_documents == 2);
  // At most n - 1 held out, at least 1.
  s = lm::split_documents("x<|endoftext|>y", sep, 0.99);
  CHECK(s.train == "x<|endoftext|>");
  CHECK(s.val == "y");
  s = lm::split_documents(text, sep, 0.01);
  CHECK(s.val == "d");
}

TEST_CASE("split_documents: ceil(fraction · n) is that of the decimal fraction, not of its rounded double", "[lm]") {
  // 0.07 · 100 = 7.000000000000001 in doubles, 0.55 · 100 = 55.00000000000001, 0.28 · 25 = 7.000000000000001:
  // the user asked for 7, 55 and 7 documents.
  struct Case {
    double fraction;
    size_t n, expected;
  };
  for (const Case& c : {Case{0.07, 100, 7}, Case{0.55, 100, 55}, Case{0.28, 25, 7}, Case{0.14, 50, 7},
                        Case{0.07, 101, 8}, Case{0.3, 10, 3}, Case{0.25, 9, 3}}) {
    std::string text;
    for (size_t i = 0; i < c.n; ++i) text += fmt::format("doc {}\n\n", i);
    INFO(c.fraction << " of " << c.n << " documents");
    const lm::TextSplit s = lm::split_documents(text, "\n\n", c.fraction);
    CHECK(s.val_documents == c.expected);
    CHECK(s.val.starts_with(fmt::format("doc {}\n", c.n - c.expected)));
  }
}

TEST_CASE("split_documents: blank-line documents, whitespace-only pieces join the previous document", "[lm]") {
  const std::string text = "para one\nline two\n\npara two\n\n\n\npara three\n\n  \t\n\npara four\n";
  lm::TextSplit s = lm::split_documents(text, "\n\n");
  CHECK(s.train_documents + s.val_documents == 4);
  CHECK(s.val_documents == 1);
  CHECK(s.val == "para four\n");
  CHECK(std::string(s.train) + std::string(s.val) == text);
  s = lm::split_documents(text, "\n\n", 0.5);
  CHECK(s.val_documents == 2);
  CHECK(s.val == "para three\n\n  \t\n\npara four\n");  // the empty piece after "para two" stayed with it
  CHECK(s.train == "para one\nline two\n\npara two\n\n\n\n");
  // Whitespace before the first document is no document, but stays in the text.
  s = lm::split_documents("\n\n \n\nfirst\n\nsecond", "\n\n");
  CHECK(s.train_documents == 1);
  CHECK(s.train == "\n\n \n\nfirst\n\n");
  CHECK(s.val == "second");
  // Trailing whitespace-only pieces join the last document.
  s = lm::split_documents("A<|endoftext|>B<|endoftext|>\n<|endoftext|> ", "<|endoftext|>");
  CHECK(s.train_documents == 1);
  CHECK(s.val == "B<|endoftext|>\n<|endoftext|> ");
}

TEST_CASE("split_documents: fewer than 2 documents, or a fraction outside (0, 1), is an error", "[lm]") {
  const std::string sep = "<|endoftext|>";
  CHECK_THROWS_WITH(lm::split_documents("only one story<|endoftext|>", sep), Catch::Contains("1 document"));
  CHECK_THROWS_WITH(lm::split_documents("one<|endoftext|>  \n<|endoftext|>\n", sep), Catch::Contains("1 document"));
  CHECK_THROWS_WITH(lm::split_documents("", sep), Catch::Contains("0 document"));
  CHECK_THROWS_WITH(lm::split_documents("one paragraph\nno blank line", "\n\n"), Catch::Contains("blank line"));
  for (double f : {0.0, 1.0, -0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    INFO("fraction " << f);
    CHECK_THROWS_WITH(lm::split_documents("a<|endoftext|>b<|endoftext|>c", sep, f), Catch::Contains("fraction"));
  }
  CHECK_THROWS_AS(lm::split_documents("a<|endoftext|>b", "", 0.1), Error);
}

// ---------------------------------------------------------------------------------------------
// MetricsLog

namespace {

lm::MetricRecord train_record(int64_t step, double loss) {
  lm::MetricRecord r;
  r.kind = lm::MetricRecord::Kind::Train;
  r.step = step;
  r.tokens = uint64_t(step) * 2048;
  r.wall_s = 0.1 * double(step) + 1.0 / 3.0;
  r.loss = loss;
  r.lr = 3e-4 / double(step);
  r.grad_norm = 1.0 + 1.0 / 7.0;
  r.tokens_per_s = 6400.5;
  return r;
}

lm::MetricRecord eval_record(int64_t step, double val_loss) {
  lm::MetricRecord r;
  r.kind = lm::MetricRecord::Kind::Eval;
  r.step = step;
  r.tokens = uint64_t(step) * 2048;
  r.wall_s = 0.1 * double(step) + 0.05;
  r.val_loss = val_loss;
  r.val_perplexity = std::exp(val_loss);
  r.val_tokens = 51200;
  return r;
}

bool same_record(const lm::MetricRecord& a, const lm::MetricRecord& b) {
  return a.kind == b.kind && a.step == b.step && a.tokens == b.tokens && same_bits(a.wall_s, b.wall_s) &&
         same_bits(a.loss, b.loss) && same_bits(a.lr, b.lr) && same_bits(a.grad_norm, b.grad_norm) &&
         same_bits(a.tokens_per_s, b.tokens_per_s) && same_bits(a.val_loss, b.val_loss) &&
         same_bits(a.val_perplexity, b.val_perplexity) && a.val_tokens == b.val_tokens;
}

}  // namespace

TEST_CASE("metrics: to_json_line / from_json_line round-trip both kinds exactly, bad lines are errors", "[lm]") {
  const lm::MetricRecord t = train_record(7, 5.123456789012345);
  const std::string tl = lm::to_json_line(t);
  CHECK(tl.find('\n') == std::string::npos);
  CHECK(tl.starts_with("{\"kind\":\"train\",\"step\":7,"));
  CHECK(tl.find("val_loss") == std::string::npos);
  CHECK(same_record(lm::from_json_line(tl), t));

  lm::MetricRecord e = eval_record(100, 4.1 + 1e-12);
  e.tokens = 123456789012ULL;
  const std::string el = lm::to_json_line(e);
  CHECK(el.starts_with("{\"kind\":\"eval\",\"step\":100,"));
  CHECK(el.find("\"loss\"") == std::string::npos);
  CHECK(el.find("\"val_perplexity\"") != std::string::npos);
  CHECK(same_record(lm::from_json_line(el), e));
  // --sft with several tasks: each task's held-out loss, in order, back exactly.
  e.val_loss_by_group = {{"fruit", 0.125 + 1e-13}, {"Be brief.", 2.5}};
  const std::string gl = lm::to_json_line(e);
  CHECK(gl.find("\"val_loss_by_group\":{\"fruit\":") != std::string::npos);
  CHECK(lm::from_json_line(gl).val_loss_by_group == e.val_loss_by_group);
  CHECK(lm::from_json_line(el).val_loss_by_group.empty());

  // Non-finite numbers are written as null and read back as non-finite (not as a loss of 0, which
  // loss_svg would then draw after a resume); absent fields of the other kind stay 0.
  lm::MetricRecord nf = eval_record(3, std::numeric_limits<double>::quiet_NaN());
  nf.val_perplexity = std::numeric_limits<double>::infinity();
  const std::string nl = lm::to_json_line(nf);
  CHECK(nl.find("\"val_loss\":null") != std::string::npos);
  const lm::MetricRecord back = lm::from_json_line(nl);
  CHECK_FALSE(std::isfinite(back.val_loss));
  CHECK_FALSE(std::isfinite(back.val_perplexity));
  CHECK(back.loss == 0.0);
  CHECK(back.val_tokens == 51200);
  CHECK(lm::loss_svg({back, eval_record(4, 2.0)}, "").find("<circle") != std::string::npos);
  CHECK(count_of(lm::loss_svg({back, eval_record(4, 2.0)}, ""), "<circle") == 2);  // one point in each panel

  for (const char* bad : {"", "not json", "[1, 2]", "{\"step\": 1}", "{\"kind\": \"train\"}",
                          "{\"kind\": \"other\", \"step\": 1}", "{\"kind\": 3, \"step\": 1}",
                          "{\"kind\":\"train\",\"step\":3,\"tok"}) {
    INFO(bad);
    CHECK_THROWS_AS(lm::from_json_line(bad), Error);
  }
}

TEST_CASE("metrics: reopening keeps the records up to the resume step and drops a torn last line", "[lm]") {
  ScratchDir dir("lm_metrics");
  const std::string path = dir.file("metrics.jsonl");
  std::vector<lm::MetricRecord> all;
  {
    lm::MetricsLog log(path, -1);
    for (int64_t step = 1; step <= 6; ++step) {
      all.push_back(train_record(step, 6.0 - 0.25 * double(step)));
      log.append(all.back());
      if (step % 2 == 0) {
        all.push_back(eval_record(step, 5.5 - 0.2 * double(step)));
        log.append(all.back());
      }
    }
    REQUIRE(log.records().size() == 9);
    // Flushed line by line: the file is complete while the log is still open.
    const auto lines = lines_of_file(path);
    REQUIRE(lines.size() == 9);
    for (size_t i = 0; i < lines.size(); ++i) CHECK(same_record(lm::from_json_line(lines[i]), all[i]));
  }
  const std::string original = read_all(path);
  REQUIRE(original.ends_with("\n"));

  SECTION("keep_until_step drops the records after it, from the file too") {
    {
      lm::MetricsLog log(path, 4);
      REQUIRE(log.records().size() == 6);  // train 1..4, eval 2, 4
      for (size_t i = 0; i < 6; ++i) CHECK(same_record(log.records()[i], all[i]));
      CHECK(lines_of_file(path).size() == 6);
      CHECK(original.starts_with(read_all(path)));
      CHECK(count_of(read_all(path), "\n") == 6);
      log.append(train_record(5, 1.5));  // the resumed run goes on
    }
    const auto lines = lines_of_file(path);
    REQUIRE(lines.size() == 7);
    CHECK(same_record(lm::from_json_line(lines[6]), train_record(5, 1.5)));
    lm::MetricsLog none(path, 0);
    CHECK(none.records().empty());
    CHECK(read_all(path).empty());
  }
  SECTION("a torn last line (no trailing newline) is dropped, even when it parses") {
    for (const std::string& torn : {std::string("{\"kind\":\"train\",\"step\":3,\"tok"),
                                   lm::to_json_line(train_record(2, 9.0))}) {
      INFO(torn);
      write_all(path, original + torn);
      {
        lm::MetricsLog log(path, 100);
        REQUIRE(log.records().size() == 9);
        CHECK(same_record(log.records().back(), all.back()));
        CHECK(read_all(path) == original);
        log.append(train_record(7, 1.0));
      }
      // The appended record starts on its own line.
      const auto lines = lines_of_file(path);
      REQUIRE(lines.size() == 10);
      CHECK(same_record(lm::from_json_line(lines[9]), train_record(7, 1.0)));
    }
  }
  SECTION("a damaged line in the middle is kept in the file as it is, left out of the records, counted") {
    auto lines = lines_of_file(path);
    lines[3] = "{\"kind\":\"tra\x01in\",\"step\":2";  // one byte changed, the rest cut off
    std::string damaged;
    for (const std::string& l : lines) damaged += l + "\n";
    write_all(path, damaged);
    {
      lm::MetricsLog log(path, 100);
      CHECK(log.damaged_lines() == 1);
      REQUIRE(log.records().size() == 8);
      CHECK(same_record(log.records()[2], all[2]));
      CHECK(same_record(log.records()[3], all[4]));
      CHECK(read_all(path) == damaged);
      log.append(train_record(7, 1.0));
    }
    CHECK(lines_of_file(path).size() == 10);
  }
  SECTION("a record that cannot be appended (file size limit: a full disk) is an error naming the file") {
    auto log = std::make_unique<lm::MetricsLog>(path, 100);
    rlimit old{};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old) == 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
    rlimit lim = old;
    lim.rlim_cur = original.size();  // not one byte more
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &lim) == 0);
    std::string error;
    try {
      log->append(train_record(7, 1.0));
    } catch (const Error& e) {
      error = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
    CHECK_THAT(error, Catch::Contains("cannot append to '" + path + "' (disk full?)"));
    CHECK(log->records().size() == 9);  // the record that was not written is not counted
    log.reset();                        // and closing the file does not write it either
    CHECK(read_all(path) == original);
  }
  SECTION("keep_until_step < 0 starts empty") {
    lm::MetricsLog log(path, -1);
    CHECK(log.records().empty());
    CHECK(read_all(path).empty());
  }
  SECTION("a missing file with keep_until_step >= 0 starts empty") {
    fs::remove(path);
    lm::MetricsLog log(path, 5);
    CHECK(log.records().empty());
    log.append(eval_record(1, 2.0));
    CHECK(lines_of_file(path).size() == 1);
  }
}

// ---------------------------------------------------------------------------------------------
// loss_svg

namespace {

// The points of the d attribute of every <path class="cls" …>, in document order (one per panel).
std::vector<std::vector<std::pair<double, double>>> path_points(const std::string& svg, const std::string& cls) {
  std::vector<std::vector<std::pair<double, double>>> out;
  const std::regex path_re("<path class=\"" + cls + "\" d=\"([^\"]*)\"");
  const std::regex point_re("([ML]) ?([-0-9.eE+naif]+),([-0-9.eE+naif]+)");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), path_re); it != std::sregex_iterator(); ++it) {
    const std::string d = (*it)[1];
    std::vector<std::pair<double, double>> pts;
    for (auto p = std::sregex_iterator(d.begin(), d.end(), point_re); p != std::sregex_iterator(); ++p)
      pts.emplace_back(std::stod((*p)[2]), std::stod((*p)[3]));
    out.push_back(pts);
  }
  return out;
}

}  // namespace

TEST_CASE("loss_svg: well-formed, one path per curve and panel, non-finite losses left out, title escaped", "[lm]") {
  std::vector<lm::MetricRecord> records;
  for (int64_t step = 1; step <= 10; ++step) {
    double loss = 6.0 - 0.3 * double(step);
    if (step == 5) loss = std::numeric_limits<double>::quiet_NaN();
    if (step == 6) loss = std::numeric_limits<double>::infinity();
    records.push_back(train_record(step, loss));
    if (step % 5 == 0) records.push_back(eval_record(step, 5.0 - 0.2 * double(step)));
  }
  records.push_back(eval_record(11, -std::numeric_limits<double>::infinity()));
  const std::string svg = lm::loss_svg(records, "run <a> & \"b\"");
  std::map<std::string, int> counts;
  CHECK(tapegrad::testing::xml_problem(svg, &counts) == "");
  CHECK(counts["svg"] == 1);
  CHECK(count_of(svg, "<path class=\"train\"") == 2);
  CHECK(count_of(svg, "<path class=\"val\"") == 2);
  CHECK(counts["circle"] == 4);  // two validation points in each panel
  CHECK(svg.find("run &lt;a&gt; &amp; &quot;b&quot;") != std::string::npos);
  CHECK(svg.find("<a>") == std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf") == std::string::npos);

  const auto train = path_points(svg, "train"), val = path_points(svg, "val");
  REQUIRE(train.size() == 2);
  REQUIRE(val.size() == 2);
  for (int p = 0; p < 2; ++p) {
    INFO("panel " << p);
    CHECK(train[p].size() == 8);  // 10 steps minus the NaN and the inf
    CHECK(val[p].size() == 2);
    // Inside the panel's plot rectangle; x grows with the step, y with falling loss (SVG y points down).
    const double left = p == 0 ? 70 : 560;
    for (const auto& [x, y] : train[p]) {
      CHECK(x >= left - 0.05);
      CHECK(x <= left + 420 + 0.05);
      CHECK(y >= 60 - 0.05);
      CHECK(y <= 360 + 0.05);
    }
    for (size_t i = 1; i < train[p].size(); ++i) {
      CHECK(train[p][i].first > train[p][i - 1].first);
      CHECK(train[p][i].second > train[p][i - 1].second);
    }
  }
  // The step panel spans the steps: the first train point (step 1) at its left edge, the last (step 10) at its right.
  CHECK(train[0].front().first == Approx(70).margin(0.06));
  CHECK(train[0].back().first == Approx(490).margin(0.06));
}

TEST_CASE("loss_svg: no records, only non-finite ones, or a single point still give a valid SVG", "[lm]") {
  for (const auto& records :
       {std::vector<lm::MetricRecord>{}, std::vector<lm::MetricRecord>{train_record(1, std::nan(""))},
        std::vector<lm::MetricRecord>{train_record(3, 2.5)}, std::vector<lm::MetricRecord>{eval_record(3, 2.5)}}) {
    INFO(records.size() << " records");
    const std::string svg = lm::loss_svg(records, "");
    CHECK(tapegrad::testing::xml_problem(svg) == "");
    CHECK(svg.find("nan") == std::string::npos);
    CHECK(svg.find("inf") == std::string::npos);
    const bool finite = !records.empty() && std::isfinite(records[0].kind == lm::MetricRecord::Kind::Train
                                                              ? records[0].loss
                                                              : records[0].val_loss);
    CHECK(count_of(svg, "<path class=") == (finite ? 2u : 0u));
  }
}

TEST_CASE("loss_svg: a log axis, the no-context reference line, and no \"-0\" tick", "[lm]") {
  std::vector<lm::MetricRecord> records;
  for (int64_t step = 1; step <= 100; ++step) records.push_back(train_record(step, 8.0 / double(step)));
  // Log axis: equal ratios are equal distances (8 → 4 → 2 → 1 at steps 1, 2, 4, 8).
  lm::LossPlotOptions log;
  log.log_scale = true;
  const std::string svg = lm::loss_svg(records, "", log);
  CHECK(tapegrad::testing::xml_problem(svg) == "");
  CHECK(svg.find("loss (nats/token, log scale)") != std::string::npos);
  const auto pts = path_points(svg, "train");
  REQUIRE(pts.size() == 2);
  const double d1 = pts[0][1].second - pts[0][0].second, d2 = pts[0][3].second - pts[0][1].second,
               d3 = pts[0][7].second - pts[0][3].second;
  CHECK(d1 == Approx(d2).margin(0.15));
  CHECK(d2 == Approx(d3).margin(0.15));
  const std::string linear = lm::loss_svg(records, "");
  const auto lin = path_points(linear, "train");
  CHECK(lin[0][1].second - lin[0][0].second ==
        Approx(2 * (lin[0][3].second - lin[0][1].second)).margin(0.35));  // linear: 8 → 4 is twice 4 → 2
  CHECK(linear.find("log scale") == std::string::npos);
  // A log axis of losses that are not all positive stays linear.
  CHECK(lm::loss_svg({train_record(1, 1.0), train_record(2, 0.0)}, "", log).find("log scale") == std::string::npos);

  // The reference line (the unigram entropy), labelled, inside the plotted range even above every loss.
  lm::LossPlotOptions ref;
  ref.reference_loss = 9.5;
  ref.reference_label = "no context (unigram entropy)";
  const std::string with_ref = lm::loss_svg(records, "", ref);
  CHECK(tapegrad::testing::xml_problem(with_ref) == "");
  CHECK(count_of(with_ref, "<g class=\"reference\">") == 2);  // one per panel
  CHECK(with_ref.find("no context (unigram entropy) 9.500") != std::string::npos);

  // Losses near 0: the ticks read 0, never -0 (a padded range starts below 0).
  const std::string near_zero = lm::loss_svg({train_record(1, 0.02), train_record(2, 0.0)}, "");
  CHECK(near_zero.find(">-0<") == std::string::npos);
  CHECK(near_zero.find(">0<") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// run_dir

TEST_CASE("run_dir: listing ignores best, temp files and malformed names and sorts by step numerically", "[lm]") {
  ScratchDir dir("lm_run_dir");
  const std::string run = dir.path.string();
  CHECK(lm::list_step_checkpoints(run).empty());  // no checkpoints/ folder yet
  CHECK_FALSE(lm::newest_checkpoint(run).has_value());
  CHECK_NOTHROW(lm::prune_checkpoints(run, 2));

  const fs::path ck = lm::checkpoints_dir(run);
  CHECK(ck == dir.path / "checkpoints");
  fs::create_directories(ck);
  auto touch = [&](const std::string& name) { write_all((ck / name).string(), "x"); };
  for (const char* name : {"step_9.safetensors", "step_10.safetensors", "step_00000002.safetensors",
                           "step_00000011.safetensors", "best.safetensors", "step_00000003.safetensors.tmp.AbC123",
                           "best.safetensors.tmp.Zz9", "step_.safetensors", "step_abc.safetensors",
                           "step_-4.safetensors", "step_5x.safetensors", "step_00000012.safetensors.bak",
                           "Step_00000013.safetensors", "step_00000014.safetensor", "notes.txt"})
    touch(name);
  fs::create_directories(ck / "step_00000015.safetensors");  // a directory, not a checkpoint

  const auto list = lm::list_step_checkpoints(run);
  std::vector<int64_t> steps;
  for (const auto& [step, path] : list) {
    steps.push_back(step);
    CHECK(fs::path(path).parent_path() == ck);
  }
  CHECK(steps == std::vector<int64_t>{2, 9, 10, 11});
  CHECK(fs::path(list[1].second).filename() == "step_9.safetensors");
  CHECK(lm::newest_checkpoint(run) == (ck / "step_00000011.safetensors").string());

  CHECK(lm::step_checkpoint_path(run, 100) == (ck / "step_00000100.safetensors").string());
  CHECK(lm::best_checkpoint_path(run) == (ck / "best.safetensors").string());

  lm::prune_checkpoints(run, 2);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(ck)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"Step_00000013.safetensors", "best.safetensors", "notes.txt",
                                         "step_-4.safetensors", "step_.safetensors", "step_00000011.safetensors",
                                         "step_00000012.safetensors.bak", "step_00000014.safetensor",
                                         "step_00000015.safetensors", "step_10.safetensors", "step_5x.safetensors",
                                         "step_abc.safetensors"});
  lm::prune_checkpoints(run, 5);  // fewer than K: nothing more goes
  CHECK(lm::list_step_checkpoints(run).size() == 2);
}

TEST_CASE("run_dir: run_dir_of_checkpoint and prepare_run_dir", "[lm]") {
  CHECK(lm::run_dir_of_checkpoint("/a/b/run/checkpoints/step_00000001.safetensors") == "/a/b/run");
  CHECK(lm::run_dir_of_checkpoint("run/checkpoints/best.safetensors") == "run");
  CHECK(lm::run_dir_of_checkpoint("checkpoints/step_00000001.safetensors") == ".");
  CHECK(lm::run_dir_of_checkpoint("/a/b/run/step_00000001.safetensors") == "");
  CHECK(lm::run_dir_of_checkpoint("model.safetensors") == "");
  CHECK(lm::run_dir_of_checkpoint("/a/checkpoints2/x.safetensors") == "");
  CHECK(lm::run_dir_of_checkpoint(lm::step_checkpoint_path("some/run", 7)) == "some/run");

  ScratchDir dir("lm_prepare");
  const std::string run = (dir.path / "deep" / "run").string();
  lm::prepare_run_dir(run);
  CHECK(fs::is_directory(lm::checkpoints_dir(run)));
  CHECK(fs::is_empty(lm::checkpoints_dir(run)));
  CHECK(std::distance(fs::directory_iterator(run), fs::directory_iterator()) == 1);  // the probe file is gone
  CHECK_NOTHROW(lm::prepare_run_dir(run));  // again: fine

  const std::string file = dir.file("a_file");
  write_all(file, "not a directory");
  CHECK_THROWS_WITH(lm::prepare_run_dir(file + "/run"), Catch::Contains(file + "/run"));
  CHECK_THROWS_WITH(lm::prepare_run_dir(file), Catch::Contains(file));
  CHECK(read_all(file) == "not a directory");
  CHECK_THROWS_AS(lm::prepare_run_dir(""), Error);

  if (::geteuid() != 0) {  // root may write anyway
    const std::string ro = (dir.path / "read_only").string();
    lm::prepare_run_dir(ro);
    fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THROWS_WITH(lm::prepare_run_dir(ro), Catch::Contains("not writable") && Catch::Contains(ro));
    fs::permissions(ro, fs::perms::owner_all);
  }
}

// ---------------------------------------------------------------------------------------------
// presets and FLOPs

TEST_CASE("presets: flops_per_token equals the bench README's figures, unknown names list the presets", "[lm]") {
  // ../shared/bench/README.md: micro 0.888 M, small 35.9 M, tiny 111.7 M model FLOPs per token.
  CHECK(fmt::format("{:.3f}", lm::flops_per_token(lm::preset_config("micro")) / 1e6) == "0.888");
  CHECK(fmt::format("{:.1f}", lm::flops_per_token(lm::preset_config("small")) / 1e6) == "35.9");
  CHECK(fmt::format("{:.1f}", lm::flops_per_token(lm::preset_config("tiny")) / 1e6) == "111.7");
  // Exactly, by hand: micro N_mm = 2·(2·64² + 2·64·4·16 + 3·64·172) + 64·512 = 131584.
  CHECK(lm::flops_per_token(lm::preset_config("micro")) == 6.0 * 131584 + 12.0 * 2 * 64 * 64);

  const nn::TransformerLMConfig micro = lm::preset_config("micro");
  CHECK(micro.vocab_size == 512);
  CHECK(micro.context_length == 64);
  CHECK(micro.d_model == 64);
  CHECK(micro.n_layers == 2);
  CHECK(micro.n_heads == 4);
  CHECK(micro.d_ff == 172);
  CHECK(lm::model_preset("micro").batch_size == 32);
  const nn::TransformerLMConfig tiny = lm::preset_config("tiny");
  CHECK(tiny.d_model == 512);
  CHECK(tiny.n_heads == 16);
  CHECK(tiny.d_ff == 1344);
  CHECK(tiny.context_length == 256);
  CHECK(lm::model_preset("tiny").batch_size == 8);
  CHECK(lm::model_preset("small").batch_size == 16);
  CHECK(lm::preset_config("small", 777).vocab_size == 777);
  // The resolved config of a built model counts the same.
  const nn::TransformerLM model(micro);
  CHECK(lm::flops_per_token(model.config) == lm::flops_per_token(micro));
  // Grouped-query attention: the K/V projections shrink with n_kv_heads.
  nn::TransformerLMConfig gqa = micro;
  gqa.n_kv_heads = 1;
  CHECK(lm::flops_per_token(micro) - lm::flops_per_token(gqa) == 6.0 * 2 * (2 * 64 * 64 - 2 * 64 * 1 * 16));

  CHECK_THROWS_WITH(lm::model_preset("huge"), Catch::Contains("'huge'") && Catch::Contains("micro") &&
                                                  Catch::Contains("small") && Catch::Contains("tiny"));
  CHECK_THROWS_WITH(lm::preset_config("Micro"), Catch::Contains("micro, small, tiny"));
}

// ---------------------------------------------------------------------------------------------
// evaluate

namespace {

nn::TransformerLMConfig eval_config() {
  nn::TransformerLMConfig c;
  c.vocab_size = 50;
  c.context_length = 8;
  c.d_model = 16;
  c.n_layers = 1;
  c.n_heads = 2;
  c.d_ff = 24;
  c.dtype = kFloat64;
  return c;
}

// The mean of nn::cross_entropy over the windows at 0, T, 2T, … (each start with start + T + 1 ≤ size),
// one window at a time.
double direct_loss(const nn::TransformerLM& model, const std::vector<uint32_t>& tokens, int64_t T, uint64_t* windows) {
  NoGradGuard no_grad;
  double sum = 0;
  uint64_t n = 0;
  for (size_t start = 0; start + size_t(T) + 1 <= tokens.size(); start += size_t(T), ++n) {
    std::vector<int64_t> in(tokens.begin() + long(start), tokens.begin() + long(start) + T);
    std::vector<int64_t> tg(tokens.begin() + long(start) + 1, tokens.begin() + long(start) + T + 1);
    sum += nn::cross_entropy(model.forward(from_vector(in, {1, T})), from_vector(tg, {1, T})).item<double>();
  }
  *windows = n;
  return sum / double(n);
}

}  // namespace

TEST_CASE("evaluate: the mean cross-entropy over non-overlapping windows, computed by hand", "[lm]") {
  const nn::TransformerLMConfig c = eval_config();
  Generator g(11);
  const nn::TransformerLM model(c, &g);
  for (size_t size : {size_t(41), size_t(40), size_t(47), size_t(9)}) {  // 5, 4, 5 and 1 windows of 8
    const std::vector<uint32_t> tokens = random_tokens(size, 50, 3 + size);
    const data::TokenSource src{std::span<const uint32_t>(tokens)};
    uint64_t windows = 0;
    const double expected = direct_loss(model, tokens, 8, &windows);
    for (int64_t batch : {1, 2, 3, 100}) {
      INFO(size << " tokens, batch " << batch);
      const lm::EvalResult r = lm::evaluate(model, src, batch);
      CHECK(r.windows == windows);
      CHECK(r.tokens == windows * 8);
      CHECK(r.loss == Approx(expected).epsilon(1e-12));
      CHECK(r.perplexity == Approx(std::exp(r.loss)).epsilon(1e-14));
    }
  }
  CHECK(lm::evaluate(model, std::span<const uint32_t>(random_tokens(41, 50, 1)), 2).windows == 5);
  // A shorter context: windows at 0, 5, 10, …
  const std::vector<uint32_t> tokens = random_tokens(33, 50, 99);
  uint64_t windows = 0;
  const double expected = direct_loss(model, tokens, 5, &windows);
  REQUIRE(windows == 6);
  const lm::EvalResult r = lm::evaluate(model, std::span<const uint32_t>(tokens), 4, 5);
  CHECK(r.windows == 6);
  CHECK(r.tokens == 30);
  CHECK(r.loss == Approx(expected).epsilon(1e-12));
  // No tape, no gradients.
  for (const auto& [name, p] : model.named_parameters()) CHECK_FALSE(p.grad().defined());
  // A random model of 50 tokens: about log(50) nats.
  CHECK(r.loss == Approx(std::log(50.0)).margin(0.5));
}

TEST_CASE("evaluate: a context longer than the model's, too little data, or an id outside the vocabulary fail",
          "[lm]") {
  Generator g(11);
  const nn::TransformerLM model(eval_config(), &g);
  const std::vector<uint32_t> tokens = random_tokens(100, 50, 5);
  const data::TokenSource src{std::span<const uint32_t>(tokens)};
  CHECK_THROWS_WITH(lm::evaluate(model, src, 2, 9), Catch::Contains("context 9") && Catch::Contains("8"));
  const std::vector<uint32_t> short8(tokens.begin(), tokens.begin() + 8);
  CHECK_THROWS_WITH(lm::evaluate(model, std::span<const uint32_t>(short8), 2), Catch::Contains("8 tokens"));
  const std::vector<uint32_t> short4(tokens.begin(), tokens.begin() + 4);
  CHECK_THROWS_AS(lm::evaluate(model, std::span<const uint32_t>(short4), 2, 4), Error);
  CHECK_NOTHROW(lm::evaluate(model, std::span<const uint32_t>(short4), 2, 3));
  CHECK_THROWS_AS(lm::evaluate(model, src, 0), Error);
  std::vector<uint32_t> bad = tokens;
  bad[20] = 50;
  CHECK_THROWS_AS(lm::evaluate(model, std::span<const uint32_t>(bad), 2), Error);
}

// ---------------------------------------------------------------------------------------------
// Trainer

namespace {

nn::TransformerLMConfig tiny_config() {
  nn::TransformerLMConfig c;
  c.vocab_size = 64;
  c.context_length = 16;
  c.d_model = 32;
  c.n_layers = 1;
  c.n_heads = 2;
  return c;
}

const std::vector<uint32_t>& train_tokens() {
  static const std::vector<uint32_t> t = random_tokens(3000, 64, 21);
  return t;
}
const std::vector<uint32_t>& val_tokens() {
  static const std::vector<uint32_t> t = random_tokens(300, 64, 22);
  return t;
}
data::TokenSource train_src() { return std::span<const uint32_t>(train_tokens()); }
data::TokenSource val_src() { return std::span<const uint32_t>(val_tokens()); }

lm::TrainOptions small_options() {
  lm::TrainOptions o;
  o.batch_size = 4;
  o.steps = 6;
  o.lr = 1e-2;
  o.min_lr = 1e-3;
  o.warmup_steps = 2;
  o.cosine_steps = 10;
  o.seed = 42;
  return o;
}

struct Run {
  lm::TrainResult result;
  std::vector<lm::StepStats> steps;
  std::vector<lm::EvalStats> evals;
};

Run run_trainer(lm::Trainer& t, std::function<bool()> should_stop = {}) {
  Run r;
  lm::TrainCallbacks cb;
  cb.on_step = [&](const lm::StepStats& s) { r.steps.push_back(s); };
  cb.on_eval = [&](const lm::EvalStats& e) { r.evals.push_back(e); };
  cb.should_stop = std::move(should_stop);
  r.result = t.run(cb);
  return r;
}

std::vector<double> losses_of(const Run& r) {
  std::vector<double> out;
  for (const auto& s : r.steps) out.push_back(s.loss);
  return out;
}

bool same_losses(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_bits(a[i], b[i])) return false;
  return true;
}

}  // namespace

TEST_CASE("Trainer: the same seed and options give the same losses step by step, the stats are consistent",
          "[lm]") {
  for (int64_t accum : {1, 2}) {
    INFO("grad_accum " << accum);
    lm::TrainOptions o = small_options();
    o.grad_accum = accum;
    lm::Trainer a(tiny_config(), o, train_src()), b(tiny_config(), o, train_src());
    const Run ra = run_trainer(a), rb = run_trainer(b);
    REQUIRE(ra.result.status == lm::TrainStatus::Completed);
    CHECK(ra.result.step == 6);
    CHECK(ra.result.last_checkpoint.empty());  // no out_dir: no files
    CHECK_FALSE(ra.result.last_eval.has_value());
    REQUIRE(ra.steps.size() == 6);
    CHECK(same_losses(losses_of(ra), losses_of(rb)));
    for (size_t i = 0; i < ra.steps.size(); ++i) {
      const lm::StepStats& s = ra.steps[i];
      CHECK(s.step == int64_t(i) + 1);
      CHECK(s.steps == 6);
      CHECK(s.tokens == uint64_t(s.step) * 4 * uint64_t(accum) * 16);
      CHECK(same_bits(s.lr, optim::cosine_lr(s.step - 1, 1e-2, 1e-3, 2, 10)));
      CHECK(std::isfinite(s.grad_norm));
      CHECK(s.grad_norm > 0);
      CHECK(same_bits(s.grad_norm, rb.steps[i].grad_norm));
    }
    CHECK(ra.steps[0].lr == 0.0);  // warm-up from 0
    // A fresh model of 64 tokens: about log 64 nats (a little above: its logits are not all equal).
    CHECK(ra.steps[0].loss > std::log(64.0) - 0.1);
    CHECK(ra.steps[0].loss < std::log(64.0) + 1.0);
    CHECK(a.step() == 6);
    CHECK(a.tokens_seen() == 6 * 4 * uint64_t(accum) * 16);
    // The trained models are bitwise equal.
    const auto sa = a.model().state_dict(), sb = b.model().state_dict();
    for (const auto& [name, t] : sa) {
      INFO(name);
      CHECK(t.to_vector<double>() == sb.at(name).to_vector<double>());
    }
    // Another seed: another initialisation and other batches.
    o.seed = 43;
    lm::Trainer c(tiny_config(), o, train_src());
    CHECK_FALSE(same_losses(losses_of(run_trainer(c)), losses_of(ra)));
  }
}

TEST_CASE("Trainer: grad_accum averages the micro-batch gradients (identical windows: B·k == (B/k)·k)", "[lm]") {
  // Every window of a constant stream is the same, so the batches do not depend on the generator:
  // batch 4 × accum 1, batch 2 × accum 2 and batch 1 × accum 4 have the same mean-loss gradient.
  const std::vector<uint32_t> constant(200, 7);
  std::vector<Run> runs;
  for (int64_t accum : {1, 2, 4}) {
    lm::TrainOptions o = small_options();
    o.steps = 3;
    o.grad_clip = 0;
    o.batch_size = 4 / accum;
    o.grad_accum = accum;
    lm::Trainer t(tiny_config(), o, std::span<const uint32_t>(constant));
    runs.push_back(run_trainer(t));
    REQUIRE(runs.back().steps.size() == 3);
    CHECK(runs.back().steps.back().tokens == 3 * 4 * 16);
  }
  for (size_t k = 1; k < runs.size(); ++k)
    for (size_t i = 0; i < 3; ++i) {
      INFO("run " << k << ", step " << i + 1);
      CHECK(runs[k].steps[i].loss == Approx(runs[0].steps[i].loss).epsilon(1e-5));
      CHECK(runs[k].steps[i].grad_norm == Approx(runs[0].steps[i].grad_norm).epsilon(1e-4));
    }
}

TEST_CASE("Trainer: N steps, checkpoint, resume, M steps gives the losses of N+M uninterrupted steps", "[lm]") {
  lm::TrainOptions o = small_options();
  o.steps = 8;
  o.cosine_steps = 8;
  o.eval_every = 2;
  o.eval_batch_size = 3;
  o.run_info["tokenizer_fingerprint"] = "fp-1";
  // The reference: 8 steps in one go, no files.
  lm::Trainer ref(tiny_config(), o, train_src(), val_src());
  const Run full = run_trainer(ref);
  REQUIRE(full.result.status == lm::TrainStatus::Completed);
  REQUIRE(full.steps.size() == 8);
  REQUIRE(full.evals.size() == 4);

  ScratchDir dir("lm_resume");
  const std::string run = dir.file("run");
  std::string ckpt4;
  {  // The interrupted run: 6 steps with checkpoints at 4 and 6 (the resume goes back to 4).
    lm::TrainOptions first = o;
    first.steps = 6;
    first.checkpoint_every = 4;
    first.out_dir = run;
    lm::Trainer t(tiny_config(), first, train_src(), val_src());
    const Run r = run_trainer(t);
    REQUIRE(r.result.status == lm::TrainStatus::Completed);
    CHECK(r.result.last_checkpoint == lm::step_checkpoint_path(run, 6));
    for (size_t i = 0; i < r.steps.size(); ++i) {
      INFO("step " << i + 1 << fmt::format(": {} vs {}", r.steps[i].loss, full.steps[i].loss));
      CHECK(same_bits(r.steps[i].loss, full.steps[i].loss));
    }
    ckpt4 = lm::step_checkpoint_path(run, 4);
    REQUIRE(fs::exists(ckpt4));
    REQUIRE(fs::exists(lm::best_checkpoint_path(run)));
  }
  const optim::Checkpoint ck = optim::read_checkpoint(ckpt4);
  CHECK(ck.step == 4);
  CHECK(ck.extra.at("tokens") == "256");
  CHECK(ck.extra.at("run.tokenizer_fingerprint") == "fp-1");
  CHECK(ck.extra.at("train.batch_size") == "4");
  CHECK(ck.extra.count("best_val_loss") == 1);

  SECTION("the resumed run continues exactly") {
    o.out_dir = run;
    lm::Trainer t(tiny_config(), o, train_src(), val_src());
    t.resume(ckpt4);
    CHECK(t.step() == 4);
    CHECK(t.tokens_seen() == 4 * 4 * 16);
    const Run r = run_trainer(t);
    REQUIRE(r.result.status == lm::TrainStatus::Completed);
    REQUIRE(r.steps.size() == 4);
    for (size_t i = 0; i < 4; ++i) {
      INFO("step " << r.steps[i].step << fmt::format(": {} vs {}", r.steps[i].loss, full.steps[4 + i].loss));
      CHECK(r.steps[i].step == full.steps[4 + i].step);
      CHECK(same_bits(r.steps[i].loss, full.steps[4 + i].loss));
      CHECK(same_bits(r.steps[i].grad_norm, full.steps[4 + i].grad_norm));
      CHECK(same_bits(r.steps[i].lr, full.steps[4 + i].lr));
      CHECK(r.steps[i].tokens == full.steps[4 + i].tokens);
    }
    REQUIRE(r.evals.size() == 2);  // at 6 and 8
    CHECK(same_bits(r.evals.back().result.loss, full.evals.back().result.loss));
    // The best-so-far comes from the checkpoint: eval at 6 is "best" exactly when it was in the full run.
    CHECK(r.evals[0].best == full.evals[2].best);
    CHECK(r.evals[1].best == full.evals[3].best);
    // The model ends bitwise equal to the uninterrupted one.
    const auto sa = t.model().state_dict(), sb = ref.model().state_dict();
    for (const auto& [name, p] : sa) {
      INFO(name);
      CHECK(p.to_vector<double>() == sb.at(name).to_vector<double>());
    }
    // metrics.jsonl: the lines of the interrupted run after step 4 were replaced, none doubled.
    std::vector<std::pair<std::string, int64_t>> seen;
    for (const std::string& line : lines_of_file(dir.file("run/metrics.jsonl"))) {
      const lm::MetricRecord m = lm::from_json_line(line);
      seen.emplace_back(m.kind == lm::MetricRecord::Kind::Train ? "train" : "eval", m.step);
      if (m.kind == lm::MetricRecord::Kind::Train)
        CHECK(same_bits(m.loss, full.steps[size_t(m.step) - 1].loss));
    }
    CHECK(seen == std::vector<std::pair<std::string, int64_t>>{
                      {"train", 1}, {"train", 2}, {"eval", 2}, {"train", 3}, {"train", 4}, {"eval", 4},
                      {"train", 5}, {"train", 6}, {"eval", 6}, {"train", 7}, {"train", 8}, {"eval", 8}});
    CHECK(tapegrad::testing::xml_problem(read_all(dir.file("run/loss.svg"))) == "");
    CHECK(optim::read_checkpoint(lm::step_checkpoint_path(run, 8)).step == 8);
    // Training wall time continues from the checkpoint's.
    const double wall4 = std::stod(ck.extra.at("wall_s"));
    CHECK(wall4 > 0);
    CHECK(r.steps[0].wall_s > wall4);
    // best.safetensors is the checkpoint of the last evaluation that improved.
    int64_t best_step = 0;
    for (const lm::EvalStats& e : full.evals)
      if (e.best) best_step = e.step;
    CHECK(optim::read_checkpoint(lm::best_checkpoint_path(run)).step == best_step);
  }
  SECTION("a checkpoint without the trainer's own entries (e.g. from import) is refused, nothing changed") {
    std::map<std::string, std::string> meta;
    const optim::TensorMap tensors = load_safetensors(ckpt4, &meta);
    int edits = 0;
    auto rewritten = [&](const std::string& key, const std::string* value) {
      auto m = meta;
      if (value) m[key] = *value;
      else m.erase(key);
      m.erase("checksum");
      m["checksum"] = optim::checkpoint_checksum(m, tensors);
      const std::string path = dir.file(fmt::format("edited_{}.safetensors", edits++));
      save_safetensors(path, tensors, m);
      return path;
    };
    const std::string not_a_number = "12ab";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {rewritten("extra.tokens", nullptr), "was not written by the trainer: it has no 'tokens'"},
        {rewritten("extra.wall_s", nullptr), "was not written by the trainer: it has no 'wall_s'"},
        {rewritten("extra.wall_s", &not_a_number), "'wall_s' = '12ab' is not a valid number"},
        {rewritten("extra.best_val_loss", &not_a_number), "'best_val_loss' = '12ab' is not a valid number"}};
    for (const auto& [path, message] : cases) {
      INFO(message);
      lm::TrainOptions other_dir = o;
      other_dir.out_dir = dir.file("new_run");
      lm::Trainer t(tiny_config(), other_dir, train_src(), val_src());
      const std::vector<double> before = t.model().state_dict().begin()->second.to_vector<double>();
      CHECK_THROWS_WITH(t.resume(path), Catch::Contains(message) && Catch::Contains(path));
      CHECK(t.step() == 0);
      CHECK(t.tokens_seen() == 0);
      CHECK(t.model().state_dict().begin()->second.to_vector<double>() == before);
      CHECK_FALSE(fs::exists(dir.file("new_run")));  // the refused resume left no run directory
    }
  }
  SECTION("a checkpoint of another model config or tokenizer is refused, nothing changed") {
    nn::TransformerLMConfig other = tiny_config();
    other.d_model = 48;
    lm::Trainer t(other, o, train_src(), val_src());
    const std::vector<double> before = t.model().state_dict().begin()->second.to_vector<double>();
    CHECK_THROWS_WITH(t.resume(ckpt4), Catch::Contains("d_model"));
    CHECK(t.step() == 0);
    CHECK(t.tokens_seen() == 0);
    CHECK(t.model().state_dict().begin()->second.to_vector<double>() == before);

    lm::TrainOptions fp = o;
    fp.run_info["tokenizer_fingerprint"] = "fp-2";
    lm::Trainer u(tiny_config(), fp, train_src(), val_src());
    CHECK_THROWS_WITH(u.resume(ckpt4), Catch::Contains("fp-1") && Catch::Contains("fp-2"));
    CHECK(u.step() == 0);
    // Without a fingerprint of its own, the trainer accepts it.
    lm::TrainOptions no_fp = o;
    no_fp.run_info.clear();
    lm::Trainer v(tiny_config(), no_fp, train_src(), val_src());
    CHECK_NOTHROW(v.resume(ckpt4));
    CHECK(v.step() == 4);
  }
}

TEST_CASE("Trainer: token ids outside the vocabulary or too little data are refused in the constructor", "[lm]") {
  const lm::TrainOptions o = small_options();
  std::vector<uint32_t> train = train_tokens();
  train[1234] = 64;
  CHECK_THROWS_WITH(lm::Trainer(tiny_config(), o, std::span<const uint32_t>(train)),
                    Catch::Contains("training data") && Catch::Contains("token id 64") && Catch::Contains("64"));
  train[1234] = 1000000;
  CHECK_THROWS_WITH(lm::Trainer(tiny_config(), o, std::span<const uint32_t>(train)),
                    Catch::Contains("token id 1000000"));
  train[1234] = 63;  // the largest valid id
  CHECK_NOTHROW(lm::Trainer(tiny_config(), o, std::span<const uint32_t>(train)));

  std::vector<uint32_t> val = val_tokens();
  val.back() = 70;
  CHECK_THROWS_WITH(lm::Trainer(tiny_config(), o, train_src(), std::span<const uint32_t>(val)),
                    Catch::Contains("validation data") && Catch::Contains("token id 70"));
  const std::vector<uint32_t> short_val(val_tokens().begin(), val_tokens().begin() + 16);
  CHECK_THROWS_WITH(lm::Trainer(tiny_config(), o, train_src(), std::span<const uint32_t>(short_val)),
                    Catch::Contains("validation data holds 16 tokens"));
  const std::vector<uint32_t> short_train(train_tokens().begin(), train_tokens().begin() + 16);
  CHECK_THROWS_WITH(lm::Trainer(tiny_config(), o, std::span<const uint32_t>(short_train)),
                    Catch::Contains("training data holds 16 tokens"));
  lm::TrainOptions bad = o;
  bad.batch_size = 0;
  CHECK_THROWS_WITH(lm::Trainer(tiny_config(), bad, train_src()), Catch::Contains("batch-size"));

  CHECK(lm::max_token_id_plus_one(std::span<const uint32_t>(train)) == 64);
  CHECK(lm::max_token_id_plus_one(std::span<const uint32_t>(std::vector<uint32_t>{})) == 0);
}

TEST_CASE("Trainer: run() into a directory that holds checkpoints is refused unless resumed, keep_last prunes",
          "[lm]") {
  ScratchDir dir("lm_refuse");
  const std::string run = dir.file("run");
  lm::TrainOptions o = small_options();
  o.steps = 5;
  o.checkpoint_every = 1;
  o.keep_last = 2;
  o.out_dir = run;
  std::vector<std::pair<std::string, int64_t>> saved;
  {
    lm::Trainer t(tiny_config(), o, train_src());
    lm::TrainCallbacks cb;
    cb.on_checkpoint = [&](const std::string& path, int64_t step) { saved.emplace_back(path, step); };
    REQUIRE(t.run(cb).status == lm::TrainStatus::Completed);
  }
  REQUIRE(saved.size() == 5);
  for (int64_t s = 1; s <= 5; ++s) CHECK(saved[size_t(s) - 1] == std::pair{lm::step_checkpoint_path(run, s), s});
  const auto list = lm::list_step_checkpoints(run);
  REQUIRE(list.size() == 2);
  CHECK(list[0].first == 4);
  CHECK(list[1].first == 5);
  CHECK(fs::exists(dir.file("run/config.json")));
  const std::string metrics = read_all(dir.file("run/metrics.jsonl"));
  const std::string newest = read_all(list[1].second);

  lm::Trainer again(tiny_config(), o, train_src());
  CHECK_THROWS_WITH(again.run(), Catch::Contains(run) && Catch::Contains("already holds checkpoints"));
  CHECK(again.step() == 0);
  // Nothing of the old run was touched.
  CHECK(read_all(dir.file("run/metrics.jsonl")) == metrics);
  CHECK(read_all(list[1].second) == newest);
  CHECK(lm::list_step_checkpoints(run).size() == 2);
  // After resume() the same directory is fine (here: already at the last step, so nothing to do).
  again.resume(list[1].second);
  const lm::TrainResult r = again.run();
  CHECK(r.status == lm::TrainStatus::Completed);
  CHECK(r.step == 5);
  // save_checkpoint without an out_dir is an error.
  lm::Trainer no_dir(tiny_config(), small_options(), train_src());
  CHECK_THROWS_WITH(no_dir.save_checkpoint(), Catch::Contains("out_dir"));
  CHECK_THROWS_WITH(no_dir.evaluate(), Catch::Contains("no validation data"));
}

TEST_CASE("Trainer: a huge learning rate diverges, naming the step and a parameter, with no checkpoint from it",
          "[lm]") {
  ScratchDir dir("lm_diverge");
  const std::string run = dir.file("run");
  lm::TrainOptions o = small_options();
  o.lr = 1e30;
  o.min_lr = 0;
  o.warmup_steps = 0;
  o.grad_clip = 0;
  o.steps = 12;
  o.checkpoint_every = 1;
  o.keep_last = 100;
  o.out_dir = run;
  lm::Trainer t(tiny_config(), o, train_src());
  const Run r = run_trainer(t);
  INFO(r.result.message);
  REQUIRE(r.result.status == lm::TrainStatus::Diverged);
  const int64_t d = r.result.step + 1;  // the step that diverged
  CHECK(r.result.step >= 1);
  CHECK(t.step() == r.result.step);
  CHECK(r.steps.size() == size_t(r.result.step));
  CHECK_THAT(r.result.message, Catch::StartsWith(fmt::format("step {}:", d)));
  bool names_parameter = false;
  for (const auto& [name, p] : t.model().named_parameters())
    names_parameter = names_parameter || r.result.message.find(name) != std::string::npos;
  CHECK(names_parameter);
  CHECK(r.result.last_checkpoint == lm::step_checkpoint_path(run, r.result.step));  // the one before
  const auto list = lm::list_step_checkpoints(run);
  REQUIRE_FALSE(list.empty());
  CHECK(list.back().first == r.result.step);  // every step before it, none at or after it
  // The diverging step changed nothing: the model is the one of the last checkpoint.
  const optim::Checkpoint ck = optim::read_checkpoint(list.back().second);
  for (const auto& [name, p] : t.model().state_dict()) {
    INFO(name);
    CHECK(p.to_vector<double>() == ck.model_state.at(name).to_vector<double>());
  }
  for (const std::string& line : lines_of_file(dir.file("run/metrics.jsonl")))
    CHECK(lm::from_json_line(line).step < d);

  SECTION("with detect_anomaly the message names the tape entry") {
    lm::TrainOptions a = o;
    a.detect_anomaly = true;
    a.out_dir = "";
    lm::Trainer u(tiny_config(), a, train_src());
    const Run ra = run_trainer(u);
    INFO(ra.result.message);
    REQUIRE(ra.result.status == lm::TrainStatus::Diverged);
    CHECK(ra.result.step == r.result.step);
    CHECK_THAT(ra.result.message, Catch::StartsWith(fmt::format("step {}:", d)) &&
                                      Catch::Contains("anomaly detection") && Catch::Contains("tape entry #"));
    CHECK_FALSE(AnomalyMode::enabled());  // the trainer's guard is gone
  }
}

TEST_CASE("Trainer: detect_anomaly finds nothing in a healthy run and changes no number", "[lm]") {
  lm::TrainOptions o = small_options();
  o.steps = 3;
  o.grad_accum = 2;
  lm::Trainer plain(tiny_config(), o, train_src(), val_src());
  o.detect_anomaly = true;
  lm::Trainer checked(tiny_config(), o, train_src(), val_src());
  const Run a = run_trainer(plain), b = run_trainer(checked);
  INFO(b.result.message);
  REQUIRE(b.result.status == lm::TrainStatus::Completed);
  CHECK(same_losses(losses_of(a), losses_of(b)));
  REQUIRE(a.result.last_eval.has_value());
  REQUIRE(b.result.last_eval.has_value());
  CHECK(same_bits(a.result.last_eval->loss, b.result.last_eval->loss));
}

TEST_CASE("Trainer: should_stop ends the run after the current step with a checkpoint there", "[lm]") {
  ScratchDir dir("lm_stop");
  const std::string run = dir.file("run");
  lm::TrainOptions o = small_options();
  o.steps = 10;
  o.out_dir = run;
  lm::Trainer t(tiny_config(), o, train_src());
  int polls = 0;
  const Run r = run_trainer(t, [&] { return ++polls >= 3; });
  CHECK(r.result.status == lm::TrainStatus::Stopped);
  CHECK(r.result.step == 3);
  CHECK(polls == 3);
  CHECK(r.steps.size() == 3);
  CHECK_THAT(r.result.message, Catch::Contains("3"));
  CHECK(r.result.last_checkpoint == lm::step_checkpoint_path(run, 3));
  const auto list = lm::list_step_checkpoints(run);
  REQUIRE(list.size() == 1);
  CHECK(list[0].first == 3);
  CHECK(optim::read_checkpoint(list[0].second).step == 3);

  // Resuming from it finishes the run with the losses of an uninterrupted one.
  lm::TrainOptions ro = o;
  lm::Trainer resumed(tiny_config(), ro, train_src());
  resumed.resume(r.result.last_checkpoint);
  const Run rest = run_trainer(resumed);
  CHECK(rest.result.status == lm::TrainStatus::Completed);
  o.out_dir = "";
  lm::Trainer whole(tiny_config(), o, train_src());
  const Run w = run_trainer(whole);
  std::vector<double> joined = losses_of(r);
  for (double l : losses_of(rest)) joined.push_back(l);
  CHECK(same_losses(joined, losses_of(w)));
}

TEST_CASE("TrainOptions::validate names the option at fault", "[lm]") {
  CHECK_NOTHROW(lm::TrainOptions().validate());
  CHECK_NOTHROW(small_options().validate());
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  using Edit = std::function<void(lm::TrainOptions&)>;
  const std::vector<std::pair<std::string, Edit>> cases = {
      {"--batch-size", [](lm::TrainOptions& o) { o.batch_size = 0; }},
      {"--batch-size", [](lm::TrainOptions& o) { o.batch_size = -3; }},
      {"--grad-accum", [](lm::TrainOptions& o) { o.grad_accum = 0; }},
      {"--steps must", [](lm::TrainOptions& o) { o.steps = 0; }},
      {"--lr must", [](lm::TrainOptions& o) { o.lr = -1e-3; }},
      {"--lr must", [&](lm::TrainOptions& o) { o.lr = nan; }},
      {"--lr must", [&](lm::TrainOptions& o) { o.lr = inf; }},
      {"--min-lr", [](lm::TrainOptions& o) { o.min_lr = o.lr * 2; }},
      {"--min-lr", [](lm::TrainOptions& o) { o.min_lr = -1e-6; }},
      {"--min-lr", [&](lm::TrainOptions& o) { o.min_lr = nan; }},
      {"--warmup-steps", [](lm::TrainOptions& o) { o.warmup_steps = 11, o.cosine_steps = 10; }},
      {"--warmup-steps", [](lm::TrainOptions& o) { o.warmup_steps = 1001, o.cosine_steps = 0; }},  // steps = 1000
      {"--warmup-steps", [](lm::TrainOptions& o) { o.warmup_steps = -1; }},
      {"--beta1", [](lm::TrainOptions& o) { o.beta1 = 1.0; }},
      {"--beta1", [](lm::TrainOptions& o) { o.beta1 = -0.1; }},
      {"--beta2", [](lm::TrainOptions& o) { o.beta2 = 1.5; }},
      {"--beta2", [&](lm::TrainOptions& o) { o.beta2 = nan; }},
      {"--eps", [](lm::TrainOptions& o) { o.eps = -1e-8; }},
      {"--weight-decay", [](lm::TrainOptions& o) { o.weight_decay = -0.1; }},
      {"--weight-decay", [&](lm::TrainOptions& o) { o.weight_decay = nan; }},
      {"--grad-clip", [&](lm::TrainOptions& o) { o.grad_clip = inf; }},
      {"--grad-clip", [&](lm::TrainOptions& o) { o.grad_clip = nan; }},
      {"--keep-last", [](lm::TrainOptions& o) { o.keep_last = 0; }},
      {"--grad-clip must be finite and >= 0", [](lm::TrainOptions& o) { o.grad_clip = -1; }},
      {"--cosine-steps must be >= 0", [](lm::TrainOptions& o) { o.cosine_steps = -1; }},
      {"--eval-every must be >= 0", [](lm::TrainOptions& o) { o.eval_every = -1; }},
      {"--eval-batch-size must be >= 0", [](lm::TrainOptions& o) { o.eval_batch_size = -8; }},
      {"--checkpoint-every must be >= 0", [](lm::TrainOptions& o) { o.checkpoint_every = -1; }},
      {"--log-every must be at least 1", [](lm::TrainOptions& o) { o.log_every = 0; }},
      {"--log-every must be at least 1", [](lm::TrainOptions& o) { o.log_every = -2; }},
  };
  for (const auto& [option, edit] : cases) {
    lm::TrainOptions o;
    edit(o);
    INFO(option);
    CHECK_THROWS_WITH(o.validate(), Catch::Contains(option));
  }
  // Allowed edge values.
  lm::TrainOptions edge;
  edge.warmup_steps = edge.steps;
  edge.min_lr = edge.lr;
  edge.grad_clip = 0;
  edge.eps = 0;
  edge.weight_decay = 0;
  edge.lr = edge.min_lr = 0;
  edge.eval_every = 0;  // 0: only at the end
  edge.checkpoint_every = 0;
  edge.eval_batch_size = 0;  // 0: the batch size
  edge.cosine_steps = 0;     // 0: steps
  edge.log_every = 1;
  CHECK_NOTHROW(edge.validate());
  // to_map holds every option, exactly.
  lm::TrainOptions m;
  m.lr = 0.1 + 0.2;
  const auto map = m.to_map();
  CHECK(map.at("lr") == "0.30000000000000004");
  CHECK(map.at("batch_size") == "32");
  CHECK(map.at("detect_anomaly") == "false");
  CHECK(map.at("device") == "cpu");
  CHECK(map.at("precision") == "fp32");
  CHECK(map.at("cuda_graph") == "off");
  CHECK(map.at("optimizer") == "adamw");
  CHECK(map.at("schedule") == "cosine");
  CHECK(map.at("muon_adjust_lr") == "original");
  CHECK(map.at("eval_at_start") == "false");
  CHECK(map.size() == 33);
}

TEST_CASE("unigram_entropy is the entropy of the token frequencies", "[lm]") {
  // 4 tokens: a a b c → p = (1/2, 1/4, 1/4) → H = ½ ln 2 + 2 · ¼ ln 4 = 1.5 ln 2.
  const std::vector<uint32_t> ids{7, 7, 3, 9};
  CHECK(lm::unigram_entropy(data::TokenSource(std::span<const uint32_t>(ids))) == Approx(1.5 * std::log(2.0)).epsilon(1e-15));
  // One repeated token: 0; n equally frequent tokens: ln n.
  const std::vector<uint32_t> same(10, 4), uniform{0, 1, 2, 3, 4};
  CHECK(lm::unigram_entropy(data::TokenSource(std::span<const uint32_t>(same))) == 0.0);
  CHECK(lm::unigram_entropy(data::TokenSource(std::span<const uint32_t>(uniform))) == Approx(std::log(5.0)).epsilon(1e-15));
}

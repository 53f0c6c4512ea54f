// test_tool_first_hour.cpp — what a new user tries first (issue 38 §1–§2), through the built tool:
//   * one plain text file without document separators trains: its last ⌈fraction·tokens⌉ tokens are held out (and
//     the output says so); `eval --held-out` holds out the same tail; --val-fraction 0 trains with no validation;
//   * llama2.c's tokenizer.bin is a tokenizer like any other for every command that reads text (train --text from
//     scratch, eval --text of the run, tokenize encode), through one loader (lm/text_tokenizer.h);
//   * `eval --text` of a model imported from llama2.c (and of a run fine-tuned from it) finds the run's tokenizer.bin;
//   * `train --eval-at-start` evaluates before the first step (a fine-tune shows where it starts);
//   * `train --sft` holds out a seeded random subset (not every 10th example), the same on --resume, and reports
//     the held-out loss per task (a "task" field, else the system prompt).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/token_file.h"
#include "lm/llama2c_tokenizer.h"
#include "shared_fixture.h"
#include "test_data_helpers.h"
#include "tool_runner.h"

using tapegrad::data::testing::read_all;
using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
using namespace tapegrad::testing;
namespace fs = std::filesystem;

namespace {

ToolResult run_ok(const std::vector<std::string>& args, const std::string& log) {
  ToolResult r = run_tool(args, log);
  INFO(args[0] << "\nstdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r;
}

ToolResult run_fails(const std::vector<std::string>& args, const std::string& log, const std::string& message) {
  ToolResult r = run_tool(args, log);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find(message) != std::string::npos);
  return r;
}

// ~24 KB of the repository's stories as ONE document: no "<|endoftext|>", no blank line.
std::string one_document_text() {
  const std::string corpus = read_all(std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt");
  std::string text;
  for (size_t i = 0; i < 24000; ++i) {
    if (corpus.compare(i, 13, "<|endoftext|>") == 0) i += 12;               // the end marker goes
    else if (corpus[i] != '\n' || text.empty() || text.back() != '\n') text += corpus[i];  // no blank line
  }
  return text;
}

// The eval records of a run's metrics.jsonl, in order.
std::vector<nlohmann::json> eval_records(const std::string& run) {
  std::vector<nlohmann::json> evals;
  std::ifstream in(fs::path(run) / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record["kind"] == "eval") evals.push_back(record);
  }
  return evals;
}

// The number before `word` in `text` ("1234 validation tokens" → 1234), or -1.
long number_before(const std::string& text, const std::string& word) {
  const size_t at = text.find(word);
  if (at == std::string::npos || at < 2) return -1;
  size_t begin = at - 1;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(text[begin - 1]))) --begin;
  return std::stol(text.substr(begin, at - 1 - begin));
}

// A llama2.c tokenizer file written here (run.c's layout: int32 max_token_length, then per piece a float score,
// an int32 length and the bytes): <unk>, <s>, </s>, the 256 byte pieces, then " " and a few merges of English.
std::string write_llama2c_tokenizer(const std::string& path) {
  std::vector<std::pair<std::string, float>> pieces = {{"<unk>", 0}, {"\n<s>\n", 0}, {"\n</s>\n", 0}};
  for (int i = 0; i < 256; ++i) pieces.emplace_back(fmt::format("<0x{:02X}>", i), 0.0f);
  const char* merges[] = {" ", "e", "t", "a", "o", "n", "h", "s", "d", "i", "r", "l", " t", "th", " th", "he",
                          " the", "an", " a", "nd", " and", "in", "ed", "er", "ou", " s", " w", "as", " was"};
  float score = -1;
  for (const char* m : merges) pieces.emplace_back(m, score -= 1);
  std::string bytes(4, '\0');
  const int32_t max_len = 8;
  std::memcpy(bytes.data(), &max_len, 4);
  for (const auto& [piece, s] : pieces) {
    const auto len = int32_t(piece.size());
    bytes.append(reinterpret_cast<const char*>(&s), 4);
    bytes.append(reinterpret_cast<const char*>(&len), 4);
    bytes += piece;
  }
  write_all(path, bytes);
  return path;
}

std::vector<std::string> micro(const std::string& text, const std::string& tokenizer, const std::string& out) {
  return {"train", "--text", text, "--tokenizer", tokenizer, "--context", "32", "--d-model", "32", "--layers", "1",
          "--heads", "2", "--batch-size", "4", "--steps", "2", "--threads", "1", "--out", out};
}

}  // namespace

TEST_CASE("tool: one text file without separators trains, its last tokens held out, and --val-fraction 0 trains without",
          "[tool][first-hour]") {
  ScratchDir dir("tool_one_text_file");
  const std::string txt = dir.file("story.txt");
  write_all(txt, one_document_text());
  run_ok({"tokenize", "train", "--input", txt, "--vocab-size", "300", "--out", dir.file("tok")}, dir.file("tok"));

  // Before: "the text has 1 document(s) … at least 2 are needed". Now the last 10 % of the tokens are held out.
  const ToolResult r = run_ok(micro(txt, dir.file("tok"), dir.file("run")), dir.file("train"));
  CHECK(r.out.find("(1 document)") != std::string::npos);
  CHECK(r.out.find("the last 10 % of the tokens: the text is one document") != std::string::npos);
  const long val = number_before(r.out, "validation tokens"), train = number_before(r.out, "training tokens");
  REQUIRE(val > 0);
  CHECK(val == (train + val + 9) / 10);  // ⌈0.1·tokens⌉
  REQUIRE(eval_records(dir.file("run")).size() == 1);
  // best.safetensors is a second name of the last step's checkpoint (before: a full copy of it).
  const fs::path best = fs::path(dir.file("run")) / "checkpoints" / "best.safetensors";
  const fs::path last = fs::path(dir.file("run")) / "checkpoints" / "step_00000002.safetensors";
  REQUIRE(fs::exists(best));
  CHECK(fs::equivalent(best, last));
  CHECK(fs::hard_link_count(best) == 2);

  // eval --held-out 0.1 of the same text evaluates exactly that tail, and says so.
  const ToolResult e = run_ok({"eval", "--checkpoint", dir.file("run"), "--text", txt, "--held-out", "0.1",
                               "--threads", "1"},
                              dir.file("eval"));
  CHECK(e.out.find(fmt::format("its last {} tokens: one document, held out by tokens", val)) != std::string::npos);
  const double logged = eval_records(dir.file("run")).back()["val_loss"].get<double>();
  const double loss = std::stod(e.out.substr(e.out.find("loss ") + 5));
  CHECK(std::abs(loss - logged) < 2e-4);  // the same tokens, windowed alike (the 4-decimal print)

  // --val-fraction 0: every token trains, no evaluation (before: "--val-fraction must be in (0, 1)").
  auto no_val = micro(txt, dir.file("tok"), dir.file("run0"));
  no_val.insert(no_val.end(), {"--val-fraction", "0"});
  const ToolResult r0 = run_ok(no_val, dir.file("train0"));
  CHECK(r0.out.find("no validation part (--val-fraction 0)") != std::string::npos);
  CHECK(number_before(r0.out, "training tokens") == train + val);
  CHECK(eval_records(dir.file("run0")).empty());
  CHECK(fs::exists(fs::path(dir.file("run0")) / "checkpoints"));

  // What is still refused, each in one line: a fraction outside [0, 1), a text too short to split.
  auto bad = micro(txt, dir.file("tok"), dir.file("bad"));
  bad.insert(bad.end(), {"--val-fraction", "1"});
  run_fails(bad, dir.file("bad1"), "--val-fraction must be in [0, 1) (0: no validation), but is 1");
  bad.back() = "-0.1";
  run_fails(bad, dir.file("bad2"), "--val-fraction must be in [0, 1) (0: no validation), but is -0.1");
  write_all(dir.file("a.txt"), "a");
  run_fails(micro(dir.file("a.txt"), dir.file("tok"), dir.file("bad")), dir.file("bad3"),
            "1 token(s) of text: too few to hold out a validation part");
  CHECK_FALSE(fs::exists(dir.file("bad")));
}

TEST_CASE("tool: llama2.c's tokenizer.bin trains a model from scratch, and eval --text and generate find it in the run",
          "[tool][first-hour]") {
  ScratchDir dir("tool_llama2c_tokenizer_text");
  const std::string tok = write_llama2c_tokenizer(dir.file("tok.bin"));
  const std::string txt = dir.file("stories.txt");
  std::string text = read_all(std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt").substr(0, 30000);
  for (size_t at; (at = text.find("<|endoftext|>\n")) != std::string::npos;) text.replace(at, 14, "\n\n");
  write_all(txt, text);

  // Before: "load_hf_tokenizer_json: tok.bin is not valid JSON".
  auto args = micro(txt, tok, dir.file("run"));
  args.push_back("--eval-at-start");
  const ToolResult r = run_ok(args, dir.file("train"));
  CHECK(r.out.find("eval @ step 0") != std::string::npos);
  const auto evals = eval_records(dir.file("run"));
  REQUIRE(evals.size() == 2);  // step 0 (--eval-at-start) and the end
  CHECK(evals[0]["step"] == 0);
  CHECK(evals[1]["step"] == 2);
  CHECK(evals[0]["val_bpb"].get<double>() > 0);
  CHECK(read_all((fs::path(dir.file("run")) / "tokenizer.bin").string()) == read_all(tok));
  const auto config = nlohmann::json::parse(read_all((fs::path(dir.file("run")) / "config.json").string()));
  CHECK(config["run"]["tokenizer_kind"] == "llama2c");
  CHECK(config["train"]["eval_at_start"] == true);
  CHECK(config["train"]["lr"].is_number());          // numbers are JSON numbers (before: strings)
  CHECK(config["model"]["d_model"] == 32);
  CHECK(config["train"]["out_dir"].is_string());     // a path stays text

  // The run's tokenizer.bin serves eval --text (bits per byte included) and generate without --tokenizer.
  const ToolResult e = run_ok({"eval", "--checkpoint", dir.file("run"), "--text", txt, "--held-out", "0.1",
                               "--threads", "1"},
                              dir.file("eval"));
  CHECK(e.out.find("bits/byte") != std::string::npos);
  CHECK(std::abs(std::stod(e.out.substr(e.out.find("loss ") + 5)) - evals[1]["val_loss"].get<double>()) < 2e-4);
  run_ok({"generate", "--checkpoint", dir.file("run"), "--prompt", "The cat", "--max-tokens", "5", "--greedy"},
         dir.file("generate"));

  // tokenize encode takes the same file through the same loader: BOS + pieces per document, as the training text.
  run_ok({"tokenize", "encode", "--tokenizer", tok, "--input", txt, "--out", dir.file("ids.bin")}, dir.file("encode"));
  const tapegrad::data::TokenFile ids(dir.file("ids.bin"));
  const tapegrad::lm::Llama2cTokenizer llama2c(tok, 288);
  const std::vector<uint32_t> first = llama2c.encode(text.substr(0, text.find("\n\n")), /*bos=*/true);
  REQUIRE(ids.size() > first.size());
  for (size_t i = 0; i < first.size(); ++i) REQUIRE(ids[i] == first[i]);
}

TEST_CASE("tool: eval --text of an import of llama2.c's stories260K and of a run fine-tuned from it",
          "[tool][first-hour]") {
  const std::string model = shared_path("data/llama2c/stories260K.bin");
  const std::string tokenizer = shared_path("data/llama2c/tok512.bin");
  ScratchDir dir("tool_eval_llama2c_import");
  run_ok({"import", "llama2c", model, tokenizer, "--out", dir.file("s260k")}, dir.file("import"));
  // info: an import holds no optimizer state, and says so (before: an "optimizer AdamW … lr 0.001" line).
  const ToolResult info = run_ok({"info", "--checkpoint", dir.file("s260k")}, dir.file("info"));
  CHECK(info.out.find("optimizer: no state saved") != std::string::npos);
  CHECK(info.out.find("optimizer AdamW") == std::string::npos);
  const std::string txt = dir.file("stories.txt");
  std::string text = read_all(std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt").substr(0, 40000);
  for (size_t at; (at = text.find("<|endoftext|>\n")) != std::string::npos;) text.replace(at, 14, "\n\n");
  write_all(txt, text);

  // Before: "no tokenizer … pass --tokenizer"; and with --tokenizer s260k/tokenizer.bin "… is not valid JSON".
  const std::vector<std::string> eval_import = {"eval", "--checkpoint", dir.file("s260k"), "--text", txt,
                                                "--held-out", "0.1", "--threads", "1"};
  const ToolResult e = run_ok(eval_import, dir.file("eval"));
  auto with_flag = eval_import;
  with_flag.insert(with_flag.end(), {"--tokenizer", (fs::path(dir.file("s260k")) / "tokenizer.bin").string()});
  const ToolResult e2 = run_ok(with_flag, dir.file("eval2"));
  CHECK(e2.out == e.out);
  const double import_loss = std::stod(e.out.substr(e.out.find("loss ") + 5));
  CHECK(import_loss < 3.0);  // stories260K on stories: far below ln 512 = 6.24

  // A fine-tune from the import: its step-0 evaluation is the import's loss on the same held-out documents.
  const ToolResult t = run_ok({"train", "--init-from", dir.file("s260k"), "--text", txt, "--batch-size", "2", "--steps",
                               "1", "--eval-at-start", "--threads", "1", "--out", dir.file("tuned")},
                              dir.file("tune"));
  const auto evals = eval_records(dir.file("tuned"));
  REQUIRE(evals.size() == 2);
  CHECK(evals[0]["step"] == 0);
  CHECK(std::abs(evals[0]["val_loss"].get<double>() - import_loss) < 2e-4);
  const ToolResult e3 = run_ok({"eval", "--checkpoint", dir.file("tuned"), "--text", txt, "--held-out", "0.1",
                                "--threads", "1"},
                               dir.file("eval3"));
  CHECK(e3.out.find("bits/byte") != std::string::npos);
}

TEST_CASE("tool: train --sft holds out a random subset of every task, reports the loss per task, resumes it exactly",
          "[tool][first-hour]") {
  ScratchDir dir("tool_sft_held_out");
  const std::string jsonl = dir.file("tasks.jsonl");
  // Written in blocks, 50 of each task: every 10th example (the old rule) held out 5 of "upper" and none of "copy"...
  // only because 50 is a multiple of 10; any block layout aliased with the stride.
  std::string lines;
  for (const char* task : {"copy", "upper"})
    for (int i = 0; i < 50; ++i) {
      std::string word(1 + i % 3, char('a' + i % 26));
      std::string answer = word;
      if (std::string(task) == "upper")
        for (char& c : answer) c = char(c - 'a' + 'A');
      lines += fmt::format(R"({{"task": "{}", "prompt": "{}", "completion": "{}"}})", task, word, answer) + "\n";
    }
  write_all(jsonl, lines);
  write_all(dir.file("words.txt"), lines);
  run_ok({"tokenize", "train", "--input", dir.file("words.txt"), "--vocab-size", "280", "--out", dir.file("tok")},
         dir.file("tok"));
  auto sft = [&](const std::string& out, int steps) {
    return std::vector<std::string>{"train", "--sft", jsonl, "--tokenizer", dir.file("tok"), "--context", "32",
                                    "--d-model", "32", "--layers", "1", "--heads", "2", "--batch-size", "4", "--steps",
                                    std::to_string(steps), "--cosine-steps", "6", "--eval-every", "3",
                                    "--checkpoint-every", "3", "--threads", "1", "--out", out};
  };
  const ToolResult r = run_ok(sft(dir.file("run"), 6), dir.file("train"));
  CHECK(r.out.find("10 held out") != std::string::npos);
  CHECK(r.out.find("held-out examples by task (2 tasks): ") != std::string::npos);
  CHECK(r.out.find("held-out loss by task:  copy ") != std::string::npos);
  const auto evals = eval_records(dir.file("run"));
  REQUIRE(evals.size() == 2);
  REQUIRE(evals[1].contains("val_loss_by_group"));
  CHECK(evals[1]["val_loss_by_group"].size() == 2);
  CHECK(evals[1]["val_loss_by_group"].contains("copy"));
  CHECK(evals[1]["val_loss_by_group"].contains("upper"));

  // Stopped after 3 steps and resumed: the same held-out examples, so the same evaluation at step 6, bit for bit.
  run_ok(sft(dir.file("half"), 3), dir.file("half"));
  auto resume = sft(dir.file("half"), 6);
  resume.push_back("--resume");
  run_ok(resume, dir.file("resume"));
  const auto resumed = eval_records(dir.file("half"));
  REQUIRE(resumed.size() == 2);
  CHECK(resumed[1]["val_loss"].get<double>() == evals[1]["val_loss"].get<double>());
  CHECK(resumed[1]["val_loss_by_group"] == evals[1]["val_loss_by_group"]);
  const auto config = nlohmann::json::parse(read_all((fs::path(dir.file("half")) / "config.json").string()));
  CHECK(config["run"]["sft_val_seed"] == std::to_string(config["train"]["seed"].get<uint64_t>()));
}

TEST_CASE("tool: the details a first hour meets (issue 38 item 10): info, loss.svg, messages, typos, swapped files",
          "[tool][first-hour]") {
  ScratchDir dir("tool_first_hour_details");
  const std::string txt = dir.file("story.txt");
  write_all(txt, one_document_text());
  run_ok({"tokenize", "train", "--input", txt, "--vocab-size", "300", "--out", dir.file("tok")}, dir.file("tok"));
  auto args = micro(txt, dir.file("tok"), dir.file("run"));
  args.insert(args.end(), {"--loss-plot", "log"});
  run_ok(args, dir.file("train"));

  // loss.svg: the log axis asked for and the no-context line (the training tokens' unigram entropy).
  const std::string svg = read_all((fs::path(dir.file("run")) / "loss.svg").string());
  CHECK(svg.find("log scale") != std::string::npos);
  CHECK(svg.find("no context (unigram entropy)") != std::string::npos);
  auto bad_plot = micro(txt, dir.file("tok"), dir.file("never"));
  bad_plot.insert(bad_plot.end(), {"--loss-plot", "cubic"});
  run_fails(bad_plot, dir.file("bad_plot"), "--loss-plot must be linear or log, but is 'cubic'");

  // info: hyperparameters to 6 significant digits (before: "lr 0.00010002733934754565"); an int8 model's dtype is
  // explained (an import's missing optimizer: the stories260K case below).
  const ToolResult info = run_ok({"info", "--checkpoint", dir.file("run")}, dir.file("info"));
  const size_t lr_at = info.out.find(" lr ");
  REQUIRE(lr_at != std::string::npos);
  const std::string lr = info.out.substr(lr_at + 4, info.out.find(' ', lr_at + 4) - lr_at - 4);
  CHECK(lr.size() <= 12);
  run_ok({"quantize", dir.file("run"), "--out", dir.file("q")}, dir.file("quantize"));
  const ToolResult qinfo = run_ok({"info", "--checkpoint", dir.file("q")}, dir.file("qinfo"));
  CHECK(qinfo.out.find("dtype = float32 (activations; the weight matrices are int8)") != std::string::npos);
  // `import llama2c` with its two files swapped (the run exported to llama2.c, and a tokenizer file): a hint.
  const std::string tok_bin = write_llama2c_tokenizer(dir.file("tok.bin"));
  run_ok({"export", "llama2c", dir.file("run"), "--out", dir.file("model.bin")}, dir.file("export"));
  const ToolResult swapped = run_tool({"import", "llama2c", tok_bin, dir.file("model.bin"), "--out", dir.file("imp")},
                                      dir.file("swapped"));
  CHECK(swapped.exit_code == 2);
  CHECK(swapped.err.find("is a llama2.c tokenizer file: the model comes first") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("imp")));

  // Options: a typo names the option meant; a bad value names the flag (before: "memory estimate: --batch-size 0 …").
  auto typo = micro(txt, dir.file("tok"), dir.file("never"));
  typo[3] = "--tokenzier";
  run_fails(typo, dir.file("typo"), "unrecognised option '--tokenzier' (did you mean --tokenizer?)");
  auto zero = micro(txt, dir.file("tok"), dir.file("never"));
  *(std::find(zero.begin(), zero.end(), "--batch-size") + 1) = "0";
  const ToolResult z = run_fails(zero, dir.file("zero"), "--batch-size must be positive, but is 0");
  CHECK(z.err.find("memory estimate") == std::string::npos);

  // Messages name the file and what is wrong, not our functions or the JSON library's internals.
  auto missing = micro(txt, dir.file("nothing_here"), dir.file("never"));
  const ToolResult m = run_fails(missing, dir.file("missing"), "tokenizer '" + dir.file("nothing_here") + "' does not exist");
  write_all(dir.file("broken.json"), "{\"model\": ");
  const ToolResult b = run_fails(micro(txt, dir.file("broken.json"), dir.file("never")), dir.file("broken"),
                                 "is not valid JSON: parse error at column");
  write_all(dir.file("bad.jsonl"), "{\"prompt\": \"a\", \"completion\": \n");
  const ToolResult s = run_fails({"train", "--sft", dir.file("bad.jsonl"), "--tokenizer", dir.file("tok"), "--out",
                                  dir.file("never")},
                                 dir.file("sft"), "bad.jsonl:1: not JSON (parse error at column");
  for (const ToolResult* r : {&m, &b, &s}) {
    CHECK(r->err.find("[json.exception") == std::string::npos);
    CHECK(r->err.find("load_") == std::string::npos);
    CHECK(std::count(r->err.begin(), r->err.end(), '\n') == 1);
  }
  CHECK_FALSE(fs::exists(dir.file("never")));
}

// test_tool_small_context.cpp — `tapegrad generate` on a model whose context is small (issue 38 §3): the micro
// preset (context 64) asked for the default 200 tokens slides past its context (nanoGPT's crop) instead of
// refusing, and says so once on stderr; --sliding is still accepted, --no-sliding refuses as before.
#include <string>
#include <vector>

#include "data/bpe_model.h"
#include "data/hf_tokenizer_json.h"
#include "test_data_helpers.h"
#include "tool_runner.h"

using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
using namespace tapegrad::testing;

namespace {

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("tool: generate on the micro preset (context 64) slides past its context by default and says so once",
          "[tool][generate]") {
  ScratchDir dir("tool_small_context");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the cat sat on the mat " + std::to_string(i) + ".\n\n";
  write_all(dir.file("text.txt"), text);
  tapegrad::data::BpeModel bytes;  // a byte tokenizer: one token per character
  for (int b = 0; b < 256; ++b) bytes.vocab.emplace_back(1, char(b));
  tapegrad::data::save_hf_tokenizer_json(bytes, dir.file("tokenizer.json"));
  const std::string run = dir.file("micro");
  ToolResult r = run_tool({"train", "--text", dir.file("text.txt"), "--tokenizer", dir.file("tokenizer.json"),
                           "--model", "micro", "--steps", "1", "--batch-size", "2", "--threads", "1", "--out", run},
                          dir.file("train"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);

  const std::string note = "generate: the text outgrew the context of 64 tokens: sliding (each token past it re-reads "
                           "the last 64); --no-sliding refuses such a request instead";
  // The default --max-tokens 200 after a 6-token prompt: 205 positions, past 64.
  r = run_tool({"generate", "--checkpoint", run, "--prompt", "the ca", "--no-stop", "--seed", "3"}, dir.file("gen"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(count_of(r.err, note) == 1);
  CHECK(r.err.find("decode: 199 tokens") != std::string::npos);
  CHECK(r.out.size() >= 6 + 200);  // the prompt and 200 byte tokens (a byte outside UTF-8 prints as 3 bytes)
  // --sliding (the default now) gives the same text; within the context nothing is said.
  const ToolResult said = run_tool({"generate", "--checkpoint", run, "--prompt", "the ca", "--no-stop", "--seed", "3",
                                    "--sliding"},
                                   dir.file("gen_sliding"));
  CHECK(said.exit_code == 0);
  CHECK(said.out == r.out);
  const ToolResult fits = run_tool({"generate", "--checkpoint", run, "--prompt", "the ca", "--max-tokens", "59"},
                                   dir.file("gen_fits"));
  CHECK(fits.exit_code == 0);
  CHECK(fits.err.find("outgrew") == std::string::npos);
  // --no-sliding: refused before anything is printed, as before; with --sliding too, refused as a contradiction.
  const ToolResult strict = run_tool({"generate", "--checkpoint", run, "--prompt", "the ca", "--no-sliding"},
                                     dir.file("gen_strict"));
  CHECK(strict.exit_code == 2);
  CHECK(strict.out.empty());
  CHECK(strict.err.find("need 205 positions, more than the model's context of 64 (without --no-sliding") !=
        std::string::npos);
  const ToolResult both = run_tool({"generate", "--checkpoint", run, "--prompt", "the", "--sliding", "--no-sliding"},
                                   dir.file("gen_both"));
  CHECK(both.exit_code == 2);
  CHECK(both.err.find("give --sliding or --no-sliding, not both") != std::string::npos);
}

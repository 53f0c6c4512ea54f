// text_codec.cpp — the byte-level BPE codec and the choice of codec for a checkpoint (see text_codec.h).
#include "lm/text_codec.h"

#include <filesystem>

#include "data/tokenizer.h"
#include "lm/llama2c_tokenizer.h"
#include "lm/model_io.h"
#include "lm/run_dir.h"

namespace tapegrad::lm {

namespace {

class BpeCodec final : public TextCodec {
 public:
  explicit BpeCodec(data::BpeModel model) : tok_(std::move(model)) {
    const auto& specials = tok_.model().special_tokens;
    if (!specials.empty()) {
      const auto ids = tok_.encode(specials.front());
      if (ids.size() == 1) stop_ = ids[0];
    }
  }
  std::vector<uint32_t> encode_prompt(std::string_view text) override { return tok_.encode(text); }
  std::string decode_token(uint32_t, uint32_t id) override { return tok_.decode_bytes({id}); }
  std::optional<uint32_t> stop_token() const override { return stop_; }
  size_t vocab_size() const override { return tok_.vocab_size(); }
  std::string kind() const override { return "bpe"; }

 private:
  data::Tokenizer tok_;
  std::optional<uint32_t> stop_;
};

}  // namespace

std::unique_ptr<TextCodec> make_bpe_codec(data::BpeModel model) { return std::make_unique<BpeCodec>(std::move(model)); }

std::unique_ptr<TextCodec> codec_for_checkpoint(const optim::Checkpoint& ck, const std::string& path,
                                                const std::string& override_path) {
  const auto kind = ck.extra.find("run.tokenizer_kind");
  if (kind != ck.extra.end() && kind->second == "llama2c") {  // imported by `tapegrad import llama2c`
    std::string source = override_path;
    if (source.empty()) {
      const std::string run = run_dir_of_checkpoint(path);
      source = (std::filesystem::path(run.empty() ? "." : run) / "tokenizer.bin").string();
      TG_CHECK(!run.empty() && std::filesystem::exists(source),
               "no tokenizer for checkpoint '{}': pass --tokenizer (the run directory holds no tokenizer.bin)", path);
    }
    const auto vocab = ck.config.find("vocab_size");
    TG_CHECK(vocab != ck.config.end(), "checkpoint '{}' has no config.vocab_size", path);
    return make_llama2c_codec(source, std::stoull(vocab->second));
  }
  return make_bpe_codec(tokenizer_for_checkpoint(ck, path, override_path));
}

}  // namespace tapegrad::lm

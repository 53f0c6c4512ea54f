// text_tokenizer.h — the one tokenizer loader of every command that reads text: `train --text`, `eval --text`,
// `tokenize encode` and the --sft codec. A tokenizer is either
//   • a byte-level BPE (data::Tokenizer): a tokenizer.json, or a folder with tokenizer.json or vocab.json + merges.txt;
//     documents end at its first special token ("<|endoftext|>"), else at a blank line;
//   • llama2.c's tokenizer (lm::Llama2cTokenizer): a tokenizer.bin / tok512.bin, or a folder holding tokenizer.bin
//     (and no tokenizer.json); documents end at a blank line and are encoded as BOS + pieces, as llama2.c does.
// A file is taken as llama2.c's when its name ends in .bin, or when its first non-blank byte is not '{' (JSON).
//
//   lm::TextTokenizer tok = lm::load_text_tokenizer("tok512.bin");                  // any command's --tokenizer
//   lm::TextTokenizer tok = lm::text_tokenizer_for_checkpoint(ck, ck_path, flag);   // a checkpoint's own
//   data::DocumentEncoder encode = tok.document_encoder(threads);  // for lm::tokenize_text_inputs
//
// The tokenizers live behind unique_ptr: a TextTokenizer may be moved while encoders made from it are alive.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "data/bpe_model.h"
#include "data/document_encode.h"
#include "data/tokenizer.h"
#include "lm/bits_per_byte.h"
#include "lm/llama2c_tokenizer.h"
#include "lm/text_codec.h"
#include "optim/checkpoint.h"

namespace tapegrad::lm {

enum class TokenizerKind { Bpe, Llama2c };

class TextTokenizer {
 public:
  TextTokenizer(std::unique_ptr<data::Tokenizer> bpe, std::string source);
  TextTokenizer(std::unique_ptr<Llama2cTokenizer> llama2c, std::string source);

  TokenizerKind kind() const { return bpe_ ? TokenizerKind::Bpe : TokenizerKind::Llama2c; }
  const char* kind_name() const { return bpe_ ? "bpe" : "llama2c"; }
  const std::string& source() const { return source_; }  // the file it was read from
  size_t vocab_size() const;

  const data::BpeModel* bpe_model() const { return bpe_ ? &bpe_->model() : nullptr; }  // null for llama2.c's
  const Llama2cTokenizer* llama2c() const { return llama2c_.get(); }                   // null for a BPE

  // Where one document ends and the next begins in a plain text (lm/text_split.h).
  std::string document_separator() const;
  // Encodes documents as the training data holds them (BPE: as is; llama2.c: BOS + pieces per document).
  data::DocumentEncoder document_encoder(int threads) const;
  // Each id's text length for bits per byte; ids up to `model_vocab` beyond the tokenizer's count 0 bytes.
  TokenByteLengths byte_lengths(size_t model_vocab) const;
  // The generation/chat codec of this tokenizer (lm/text_codec.h).
  std::unique_ptr<TextCodec> codec() const;

 private:
  std::unique_ptr<data::Tokenizer> bpe_;
  std::unique_ptr<Llama2cTokenizer> llama2c_;
  std::string source_;
};

// True when `path` names llama2.c's tokenizer (see the rule above): a file, or a folder holding tokenizer.bin only.
bool is_llama2c_tokenizer_path(const std::string& path);

// The tokenizer at `path` (a file or folder, see above). For llama2.c's file, `llama2c_vocab` is the number of
// pieces it holds (the file does not say; 0: count them to the end of the file). tapegrad::Error naming the path
// when nothing there is a tokenizer.
TextTokenizer load_text_tokenizer(const std::string& path, size_t llama2c_vocab = 0);

// The tokenizer of a checkpoint: `override_path` when given, else its run directory's (tokenizer.json, or
// tokenizer.bin for a model that came from `import llama2c` and the runs tuned from it). A BPE tokenizer is
// checked against the checkpoint's recorded fingerprint (lm::tokenizer_for_checkpoint); llama2.c's is read with
// the model's vocabulary less any chat-template tokens an --sft run appended.
TextTokenizer text_tokenizer_for_checkpoint(const optim::Checkpoint& ck, const std::string& path,
                                            const std::string& override_path);

// True when the checkpoint's run records llama2.c's tokenizer (run.tokenizer_kind = llama2c).
bool checkpoint_uses_llama2c_tokenizer(const optim::Checkpoint& ck);

}  // namespace tapegrad::lm

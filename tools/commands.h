// commands.h — the tool's subcommands, one file each (cmd_<name>.cpp); main.cpp dispatches on
// argv[1]. Each takes the arguments after its name and returns the process exit status.
#pragma once
#include "tools/cli.h"

namespace tapegrad::cli {

int cmd_demo(Args args);      // cmd_demo.cpp: fit an MLP on the tape, print the tape, gradcheck it
int cmd_dot(Args args);       // cmd_dot.cpp: the README's first example as DOT (with values) or a backward-stepping HTML page
int cmd_info(Args args);      // cmd_info.cpp: version, BLAS core, threads; or a checkpoint's contents
int cmd_tokenize(Args args);  // cmd_tokenize.cpp: `tokenize train` (BPE) and `tokenize encode` (text → token file)
int cmd_train(Args args);     // cmd_train.cpp: train a TransformerLM (lm::Trainer)
int cmd_eval(Args args);      // cmd_eval.cpp: loss and perplexity of a checkpoint on token data or text
int cmd_generate(Args args);  // cmd_generate.cpp: text from a checkpoint (KV cache, sampling)
int cmd_chat(Args args);      // cmd_chat.cpp: a conversation with an instruction-tuned checkpoint
int cmd_import(Args args);    // cmd_import.cpp: `import llama2c` / `import hf`: a llama2.c or Hugging Face Llama model as a checkpoint
int cmd_quantize(Args args);  // cmd_quantize.cpp: a checkpoint's weights as int8 (Q8_0) for generation
int cmd_export(Args args);    // cmd_export.cpp: `export hf`: a checkpoint as a Hugging Face Llama directory

}  // namespace tapegrad::cli

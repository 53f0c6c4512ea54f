// lm_optimizer.h — the optimizer of a language model's training run, chosen by name (`train --optimizer`):
//   adamw  AdamW over everything: matrices (dim ≥ 2) with weight decay, vectors (norm gains) without
//   muon   Muon (optim/muon.h) over the hidden weight matrices — the 2-D weights inside the blocks — and
//          AdamW over the rest: embeddings and the LM head with weight decay, vectors without, at AdamW's lr.
//          (The embedding is a lookup table, not a linear map of its input, and the head's output is read
//          as logits: orthogonalising their updates does not help them — Keller Jordan's Muon write-up.)
// One Optimizer either way (a CombinedOptimizer for muon), so the Trainer has no branch per optimizer.
//
//   auto opt = make_lm_optimizer(params, LmOptimizerSettings{OptimizerKind::Muon, adamw, muon});
//
// Groups, in order: muon → [Muon: hidden matrices] then adamw's; adamw → [matrices, decay] [vectors, no decay].
// An empty group is left out (a model with no gains has no vector group).
// Layering: optim/ does not know nn/; the caller says which parameters are hidden matrices.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "optim/adamw.h"
#include "optim/muon.h"

namespace tapegrad::optim {

enum class OptimizerKind { AdamW, Muon };
// "adamw" / "muon"; anything else: tapegrad::Error naming --optimizer.
OptimizerKind parse_optimizer_kind(const std::string& name);
const char* optimizer_kind_name(OptimizerKind kind);

struct NamedParameter {
  std::string name;
  Tensor tensor;
  bool hidden_matrix = false;  // a 2-D weight inside a block (Muon's, with OptimizerKind::Muon)
};

struct LmOptimizerSettings {
  OptimizerKind kind = OptimizerKind::AdamW;
  AdamWOptions adamw;  // lr, betas, eps, weight decay of every AdamW group
  MuonOptions muon;    // lr, momentum, … of the Muon group (its own lr: the schedule moves it in proportion)
};

std::unique_ptr<Optimizer> make_lm_optimizer(const std::vector<NamedParameter>& params,
                                             const LmOptimizerSettings& settings);

}  // namespace tapegrad::optim

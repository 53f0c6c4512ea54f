// grad_hooks.h — a callback when a leaf's gradient is complete within a backward. Data-parallel
// training (dist/grad_sync.h) uses it to start averaging a bucket of gradients over the ranks while
// backward is still computing the earlier layers' gradients (PyTorch: register_post_accumulate_grad_hook).
//
//   GradReadyHook hook(model.parameters(), [&](size_t i) { /* parameters()[i].grad() is final */ });
//   loss.backward();   // calls the callback once per leaf that this backward reaches
//
// While a GradReadyHook lives, every backward that accumulates into one of its leaves calls
// on_ready(i) once for that leaf, on the thread running backward, right after the last contribution of
// that backward was added to leaves[i].grad() (the engine counts the tape's edges into each watched
// leaf when it collects the tape). Leaves the backward does not reach are not called. Several hooks may
// watch one leaf (each is called); a hook that throws aborts the backward like a failing op.
// Watching nothing costs a backward nothing (one empty-registry check).
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad {

class GradReadyHook {
 public:
  GradReadyHook(std::vector<Tensor> leaves, std::function<void(size_t index)> on_ready);
  ~GradReadyHook();
  GradReadyHook(const GradReadyHook&) = delete;
  GradReadyHook& operator=(const GradReadyHook&) = delete;

  const std::vector<Tensor>& leaves() const { return leaves_; }

 private:
  friend class Engine;
  std::vector<Tensor> leaves_;  // held: a watched leaf cannot die (or its address be reused) under the hook
  std::function<void(size_t)> on_ready_;
};

}  // namespace tapegrad

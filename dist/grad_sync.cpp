// grad_sync.cpp — GradientSync (see grad_sync.h).
#include "dist/grad_sync.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"

namespace tapegrad::dist {

GradientSync::GradientSync(std::shared_ptr<Communicator> comm, std::vector<Tensor> params,
                           GradientSyncOptions options)
    : comm_(std::move(comm)), params_(std::move(params)), options_(options) {
  TG_CHECK(comm_ != nullptr, "GradientSync: no communicator");
  TG_CHECK(options_.bucket_bytes > 0, "GradientSync: bucket_bytes must be positive");
  bucket_of_.resize(params_.size());
  slot_of_.resize(params_.size());
  copied_.assign(params_.size(), false);
  // Reverse order: the last parameters' gradients are ready first.
  for (size_t k = params_.size(); k-- > 0;) {
    const Tensor& p = params_[k];
    TG_CHECK(p.defined() && p.is_leaf() && p.requires_grad(), "GradientSync: parameter {} is not a leaf that "
             "requires grad", k);
    const size_t bytes = size_t(p.numel()) * dtype_size(p.dtype());
    const bool fits = !buckets_.empty() && [&] {
      const Bucket& b = buckets_.back();
      const Tensor& first = params_[b.params.front()];
      const size_t used = size_t(b.offsets.back() + params_[b.params.back()].numel()) * dtype_size(first.dtype());
      return first.dtype() == p.dtype() && first.device() == p.device() && used + bytes <= options_.bucket_bytes;
    }();
    if (!fits) buckets_.emplace_back();
    Bucket& b = buckets_.back();
    const int64_t offset = b.params.empty() ? 0 : b.offsets.back() + params_[b.params.back()].numel();
    bucket_of_[k] = buckets_.size() - 1;
    slot_of_[k] = b.params.size();
    b.params.push_back(k);
    b.offsets.push_back(offset);
  }
  for (Bucket& b : buckets_) {
    const Tensor& first = params_[b.params.front()];
    const int64_t n = b.offsets.back() + params_[b.params.back()].numel();
    b.flat = zeros({n}, first.options());
  }
  if (options_.overlap && comm_->world_size() > 1)
    hook_ = std::make_unique<GradReadyHook>(params_, [this](size_t i) { on_ready(i); });
}

GradientSync::~GradientSync() = default;

void GradientSync::begin() {
  TG_CHECK(!armed_, "GradientSync::begin: called twice without finish()");
  armed_ = true;
  started_early_ = 0;
  copied_.assign(params_.size(), false);
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.work.reset();
  }
}

void GradientSync::copy_in(size_t k) {
  Bucket& b = buckets_[bucket_of_[k]];
  const Tensor& p = params_[k];
  Tensor slice = b.flat.narrow(0, b.offsets[slot_of_[k]], p.numel());
  NoGradGuard no_grad;
  if (p.grad().defined()) slice.copy_(p.grad().reshape({-1}));
  else slice.zero_();
  copied_[k] = true;
  ++b.ready;
}

void GradientSync::start(Bucket& b) { b.work = comm_->all_reduce_async(b.flat, ReduceOp::Mean); }

void GradientSync::on_ready(size_t k) {
  if (!armed_ || copied_[k]) return;  // a backward outside begin()/finish(), or a second one: local only
  copy_in(k);
  Bucket& b = buckets_[bucket_of_[k]];
  if (b.ready == b.params.size()) {
    start(b);
    ++started_early_;
  }
  // Move the buckets in flight along (MPI progresses a non-blocking collective only inside MPI calls).
  for (Bucket& other : buckets_)
    if (other.work) other.work->test();
}

void GradientSync::finish() {
  TG_CHECK(armed_, "GradientSync::finish: begin() was not called");
  armed_ = false;
  if (comm_->world_size() == 1) return;  // the mean over one rank is the gradient itself
  // Buckets still open: their missing gradients now (zero where backward gave none), then start them.
  for (Bucket& b : buckets_) {
    if (b.work) continue;
    for (size_t k : b.params)
      if (!copied_[k]) copy_in(k);
    start(b);
  }
  // Wait for each (every rank started the same buckets in the same order: the tape is the same), then
  // write the means back.
  NoGradGuard no_grad;
  for (Bucket& b : buckets_) {
    b.work->wait();
    b.work.reset();
    for (size_t s = 0; s < b.params.size(); ++s) {
      Tensor& p = params_[b.params[s]];
      const Tensor mean = b.flat.narrow(0, b.offsets[s], p.numel()).reshape(p.shape());
      if (p.grad().defined()) {
        Tensor g = p.grad();
        g.copy_(mean);
      } else {
        p.set_grad(mean.clone());
      }
    }
  }
}

}  // namespace tapegrad::dist

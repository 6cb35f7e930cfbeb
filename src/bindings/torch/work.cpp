#include "work.hpp"

#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include "queue.hpp"

namespace nlccl_torch {

WorkNlccl::WorkNlccl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

WorkNlccl::~WorkNlccl() = default;

void WorkNlccl::keep(at::Tensor t) { kept_.push_back(std::move(t)); }

void WorkNlccl::onSuccess(std::function<void()> f) { onSuccess_.push_back(std::move(f)); }

void WorkNlccl::deferTo(std::weak_ptr<Queue> queue) {
  queue_ = std::move(queue);
  deferred_.store(true);
}

void WorkNlccl::issueIfDeferred() {
  if (!deferred_.load()) return;
  if (auto q = queue_.lock()) q->flush();
}

bool WorkNlccl::isCompleted() {
  issueIfDeferred();
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool WorkNlccl::wait(std::chrono::milliseconds timeout) {
  issueIfDeferred();
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout <= kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    TORCH_CHECK(false, "nlccl_torch: ", c10d::opTypeToString(opType_), " did not complete within ",
                timeout.count(), " ms");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkNlccl::getFuture() {
  issueIfDeferred();
  return future_;
}

std::vector<at::Tensor> WorkNlccl::result() { return outputs_; }

void WorkNlccl::complete(std::exception_ptr error) {
  if (!error) {
    try {
      for (auto& f : onSuccess_) f();
    } catch (...) {
      error = std::current_exception();
    }
  }
  onSuccess_.clear();
  kept_.clear();
  // As gloo does it: the future (and the callbacks attached with then()) first, then wait().
  if (error) future_->setError(error);
  else future_->markCompleted(c10::IValue(outputs_));
  finish(error);
}

at::Tensor contiguousFor(WorkNlccl& work, const at::Tensor& t, bool copyBack) {
  if (t.is_contiguous()) {
    work.keep(t);
    return t;
  }
  at::Tensor c = t.contiguous();
  work.keep(c);
  if (copyBack) work.onSuccess([t, c]() mutable { t.copy_(c); });
  return c;
}

}  // namespace nlccl_torch

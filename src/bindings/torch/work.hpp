// The c10d::Work of one nlccl operation: completed by the Queue's completion thread once the
// operation's nlccl calls have run on the process group's stream.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <ATen/core/ivalue.h>

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

namespace nlccl_torch {

class Queue;

class WorkNlccl : public c10d::Work {
 public:
  /// `outputs` are what result() and the future's value hold (DDP reads the future's value).
  WorkNlccl(int rank, c10d::OpType type, std::vector<at::Tensor> outputs);
  ~WorkNlccl() override;

  bool isCompleted() override;
  /// Blocks until the operation completed; rethrows its error. A positive `timeout` that passes
  /// first raises a RuntimeError (the operation itself goes on).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  /// Completes with result(), or with the operation's error.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override;

  /// Keeps `t` alive until the work completes (inputs and staging buffers the calls use).
  void keep(at::Tensor t);
  /// Runs `f` once the calls succeeded, before the work counts as complete (copies out of
  /// staging buffers). Not called on failure.
  void onSuccess(std::function<void()> f);

  // ---- used by Queue ----
  /// Sends and receives wait in the queue until something needs them (see Queue::postP2P):
  /// waiting on or polling this work then issues them.
  void deferTo(std::weak_ptr<Queue> queue);
  void issued() { deferred_.store(false); }
  /// Runs the onSuccess steps (unless `error`), then completes the future (running its
  /// callbacks) and the work. Called on a Callbacks thread.
  void complete(std::exception_ptr error);

 private:
  void issueIfDeferred();

  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> kept_;
  std::vector<std::function<void()>> onSuccess_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::weak_ptr<Queue> queue_;
  std::atomic<bool> deferred_{false};
};

/// `t` when it is contiguous, else a contiguous copy; `work` keeps the result alive until it
/// completes. With `copyBack` a copy is written back into `t` when the work succeeds (outputs).
at::Tensor contiguousFor(WorkNlccl& work, const at::Tensor& t, bool copyBack);

}  // namespace nlccl_torch

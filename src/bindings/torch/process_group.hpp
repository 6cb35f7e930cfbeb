// ProcessGroupNlccl: a c10d::ProcessGroup (torch 1.13 API) whose operations run on one nlccl
// communicator and stream. Rank 0 makes the nlccl unique id and hands it to the others through
// the c10d store; the timeout given to init_process_group becomes the communicator's timeout, so
// a dead or stuck peer turns into an exception on wait() instead of a hang.
//
// Operations take CPU tensors, one per process (allreduce_coalesced takes several). Reductions
// support the dtypes nlccl reduces (see dtypes.hpp); data movement takes any dtype. Sends and
// receives match in posting order per pair of ranks; tags are not used (as in NCCL).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>

#include "queue.hpp"
#include "work.hpp"

namespace nlccl_torch {

class ProcessGroupNlccl : public c10d::ProcessGroup {
 public:
  ProcessGroupNlccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  /// Waits for queued operations (or aborts the communicator after a failure), then frees it.
  ~ProcessGroupNlccl() override;

  const std::string getBackendName() const override { return "nlccl"; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // ---- collectives.cpp ----
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // ---- gathers.cpp ----
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;

  // ---- p2p.cpp (gather and scatter are grouped sends and receives) ----
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;

 private:
  c10::intrusive_ptr<WorkNlccl> makeWork(c10d::OpType type, std::vector<at::Tensor> outputs);
  /// Raises unless 0 <= r < size; `what` names the operation and `name` the argument.
  void checkRank(int64_t r, const char* what, const char* name) const;
  nlcclComm_t comm() const { return queue_->comm(); }

  std::chrono::milliseconds timeout_;
  std::shared_ptr<Queue> queue_;
};

}  // namespace nlccl_torch

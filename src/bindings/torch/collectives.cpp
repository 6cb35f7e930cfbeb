// All-reduce, broadcast, reduce and barrier: each is one nlccl call, in place.
#include <c10/util/Exception.h>

#include "dtypes.hpp"
#include "process_group.hpp"

namespace nlccl_torch {

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  at::Tensor& t = single(tensors, "allreduce");
  Reduction red = reduction(t, opts.reduceOp, "allreduce");
  auto work = makeWork(c10d::OpType::ALLREDUCE, {t});
  at::Tensor buf = contiguousFor(*work, t, true);
  nlcclComm_t c = comm();
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), red.type, red.op, c, s);
  }, "allreduce");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "nlccl_torch: allreduce_coalesced needs at least one tensor");
  std::vector<Reduction> reds;
  for (const at::Tensor& t : tensors) {
    checkTensor(t, "allreduce_coalesced");
    reds.push_back(reduction(t, opts.reduceOp, "allreduce_coalesced"));
  }
  auto work = makeWork(c10d::OpType::ALLREDUCE_COALESCED, tensors);
  std::vector<at::Tensor> bufs;
  for (const at::Tensor& t : tensors) bufs.push_back(contiguousFor(*work, t, true));
  nlcclComm_t c = comm();
  // One group: the all-reduces are issued together and run as one unit of work.
  queue_->post(work, [=](nlcclStream_t s) {
    nlcclResult_t r = nlcclGroupStart();
    for (size_t i = 0; i < bufs.size() && r == nlcclSuccess; ++i)
      r = nlcclAllReduce(bufs[i].data_ptr(), bufs[i].data_ptr(), bufs[i].numel(), reds[i].type,
                         reds[i].op, c, s);
    nlcclResult_t end = nlcclGroupEnd();
    return r != nlcclSuccess ? r : end;
  }, "allreduce_coalesced");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  at::Tensor& t = single(tensors, "broadcast");
  checkRank(opts.rootRank, "broadcast", "root rank");
  TORCH_CHECK(opts.rootTensor == 0, "nlccl_torch: broadcast: root tensor must be 0, got ",
              opts.rootTensor);
  auto work = makeWork(c10d::OpType::BROADCAST, {t});
  at::Tensor buf = contiguousFor(*work, t, rank_ != opts.rootRank);
  Elements e = movedElements(buf);
  nlcclComm_t c = comm();
  int root = static_cast<int>(opts.rootRank);
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclBroadcast(buf.data_ptr(), buf.data_ptr(), e.count, e.type, root, c, s);
  }, "broadcast");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  at::Tensor& t = single(tensors, "reduce");
  checkRank(opts.rootRank, "reduce", "root rank");
  TORCH_CHECK(opts.rootTensor == 0, "nlccl_torch: reduce: root tensor must be 0, got ",
              opts.rootTensor);
  Reduction red = reduction(t, opts.reduceOp, "reduce");
  auto work = makeWork(c10d::OpType::REDUCE, {t});
  // In place: as in NCCL, only the root's receive buffer is written, so the other ranks keep
  // their input (ops_test checks it).
  at::Tensor buf = contiguousFor(*work, t, rank_ == opts.rootRank);
  nlcclComm_t c = comm();
  int root = static_cast<int>(opts.rootRank);
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), red.type, red.op, root, c, s);
  }, "reduce");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::barrier(const c10d::BarrierOptions& opts) {
  // An all-reduce of one byte: no rank leaves before every rank has entered.
  at::Tensor token = at::zeros({1}, at::kByte);
  auto work = makeWork(c10d::OpType::BARRIER, {});
  work->keep(token);
  nlcclComm_t c = comm();
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclAllReduce(token.data_ptr(), token.data_ptr(), 1, nlcclUint8, nlcclMax, c, s);
  }, "barrier");
  return work;
}

}  // namespace nlccl_torch

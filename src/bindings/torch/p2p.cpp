// Send and receive, and gather and scatter as grouped sends and receives (the root sends to and
// receives from itself too, so its own block moves in order with the rest of the stream).
#include <c10/util/Exception.h>

#include "dtypes.hpp"
#include "process_group.hpp"

namespace nlccl_torch {

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::send(std::vector<at::Tensor>& tensors,
                                                       int dstRank, int /*tag*/) {
  at::Tensor& t = single(tensors, "send");
  checkRank(dstRank, "send", "destination rank");
  auto work = makeWork(c10d::OpType::SEND, {});
  at::Tensor buf = contiguousFor(*work, t, false);
  Elements e = movedElements(buf);
  nlcclComm_t c = comm();
  queue_->postP2P(work, [=](nlcclStream_t s) {
    return nlcclSend(buf.data_ptr(), e.count, e.type, dstRank, c, s);
  }, "send");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::recv(std::vector<at::Tensor>& tensors,
                                                       int srcRank, int /*tag*/) {
  at::Tensor& t = single(tensors, "recv");
  checkRank(srcRank, "recv", "source rank");
  auto work = makeWork(c10d::OpType::RECV, {t});
  at::Tensor buf = contiguousFor(*work, t, true);
  Elements e = movedElements(buf);
  nlcclComm_t c = comm();
  queue_->postP2P(work, [=](nlcclStream_t s) {
    return nlcclRecv(buf.data_ptr(), e.count, e.type, srcRank, c, s);
  }, "recv");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  at::Tensor& in = single(inputs, "gather");
  checkRank(opts.rootRank, "gather", "root rank");
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                "nlccl_torch: gather: the root needs one output list of ", size_, " tensors");
    for (const at::Tensor& o : outputs[0]) checkSameKind(o, in, "gather");
    outs = outputs[0];
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "nlccl_torch: gather: only the root (rank ", root, ") takes output tensors");
  }
  auto work = makeWork(c10d::OpType::GATHER, outs);
  at::Tensor src = contiguousFor(*work, in, false);
  std::vector<at::Tensor> dsts;
  for (const at::Tensor& o : outs) dsts.push_back(contiguousFor(*work, o, true));
  Elements e = movedElements(src);
  nlcclComm_t c = comm();
  queue_->post(work, [=](nlcclStream_t s) {
    nlcclResult_t r = nlcclGroupStart();
    if (r == nlcclSuccess) r = nlcclSend(src.data_ptr(), e.count, e.type, root, c, s);
    for (int p = 0; p < static_cast<int>(dsts.size()) && r == nlcclSuccess; ++p)
      r = nlcclRecv(dsts[p].data_ptr(), e.count, e.type, p, c, s);
    nlcclResult_t end = nlcclGroupEnd();
    return r != nlcclSuccess ? r : end;
  }, "gather");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  at::Tensor& out = single(outputs, "scatter");
  checkRank(opts.rootRank, "scatter", "root rank");
  const int root = static_cast<int>(opts.rootRank);
  auto work = makeWork(c10d::OpType::SCATTER, {out});
  std::vector<at::Tensor> srcs;
  if (rank_ == root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                "nlccl_torch: scatter: the root needs one input list of ", size_, " tensors");
    for (const at::Tensor& i : inputs[0]) {
      checkSameKind(i, out, "scatter");
      srcs.push_back(contiguousFor(*work, i, false));
    }
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "nlccl_torch: scatter: only the root (rank ", root, ") takes input tensors");
  }
  at::Tensor dst = contiguousFor(*work, out, true);
  Elements e = movedElements(dst);
  nlcclComm_t c = comm();
  queue_->post(work, [=](nlcclStream_t s) {
    nlcclResult_t r = nlcclGroupStart();
    for (int p = 0; p < static_cast<int>(srcs.size()) && r == nlcclSuccess; ++p)
      r = nlcclSend(srcs[p].data_ptr(), e.count, e.type, p, c, s);
    if (r == nlcclSuccess) r = nlcclRecv(dst.data_ptr(), e.count, e.type, root, c, s);
    nlcclResult_t end = nlcclGroupEnd();
    return r != nlcclSuccess ? r : end;
  }, "scatter");
  return work;
}

}  // namespace nlccl_torch

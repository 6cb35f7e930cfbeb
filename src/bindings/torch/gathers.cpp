// All-gather, reduce-scatter and all-to-all. The list forms go through one flat buffer: inputs
// are packed when the call is made, outputs unpacked when the operation succeeded.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "dtypes.hpp"
#include "process_group.hpp"

namespace nlccl_torch {

namespace {

/// Copies consecutive slices of `flat` into `outputs` (run when the work succeeds).
void unpackInto(WorkNlccl& work, const at::Tensor& flat, const std::vector<at::Tensor>& outputs) {
  work.onSuccess([flat, outputs] {
    int64_t at = 0;
    for (const at::Tensor& o : outputs) {
      o.copy_(flat.narrow(0, at, o.numel()).view(o.sizes()));
      at += o.numel();
    }
  });
}

/// One flat, contiguous tensor holding `tensors` one after another.
at::Tensor pack(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void checkList(const std::vector<at::Tensor>& list, const at::Tensor& like, size_t size,
               const char* what) {
  TORCH_CHECK(list.size() == size, "nlccl_torch: ", what, " needs one tensor per rank (", size,
              "), got ", list.size());
  for (const at::Tensor& t : list) checkSameKind(t, like, what);
}

/// Element counts and displacements of `rows` rows per rank (equal when `splits` is empty).
void splitCounts(const at::Tensor& t, const std::vector<int64_t>& splits, int size,
                 const char* name, std::vector<size_t>* counts, std::vector<size_t>* displs) {
  TORCH_CHECK(t.dim() > 0 || splits.empty(), "nlccl_torch: alltoall_base: a 0-d ", name,
              " tensor cannot be split");
  const int64_t rows = t.dim() > 0 ? t.size(0) : 1;
  const int64_t rowElems = rows > 0 ? t.numel() / rows : 0;
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "nlccl_torch: alltoall_base: the ", name, " tensor's dim 0 (",
                rows, ") does not divide equally across the ", size, " ranks");
  } else {
    TORCH_CHECK(splits.size() == static_cast<size_t>(size), "nlccl_torch: alltoall_base: ",
                splits.size(), " ", name, " split sizes for ", size, " ranks");
    int64_t sum = 0;
    for (int64_t s : splits) {
      TORCH_CHECK(s >= 0, "nlccl_torch: alltoall_base: negative ", name, " split size ", s);
      sum += s;
    }
    TORCH_CHECK(sum == rows, "nlccl_torch: alltoall_base: ", name, " split sizes add up to ", sum,
                ", but dim 0 is ", rows);
  }
  size_t at = 0;
  for (int r = 0; r < size; ++r) {
    int64_t n = splits.empty() ? rows / size : splits[r];
    counts->push_back(static_cast<size_t>(n * rowElems));
    displs->push_back(at);
    at += counts->back();
  }
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  at::Tensor& in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "nlccl_torch: allgather takes one output list per process");
  checkList(outputs[0], in, size_, "allgather");
  auto work = makeWork(c10d::OpType::ALLGATHER, outputs[0]);
  at::Tensor src = contiguousFor(*work, in, false);
  at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
  work->keep(flat);
  unpackInto(*work, flat, outputs[0]);
  Elements e = movedElements(src);
  nlcclComm_t c = comm();
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclAllGather(src.data_ptr(), flat.data_ptr(), e.count, e.type, c, s);
  }, "allgather");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::_allgather_base(at::Tensor& output,
                                                                  at::Tensor& input,
                                                                  const c10d::AllgatherOptions&) {
  checkTensor(input, "_allgather_base");
  checkTensor(output, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "nlccl_torch: _allgather_base: output dtype ", output.scalar_type(),
              " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(output.numel() == size_ * input.numel(), "nlccl_torch: _allgather_base: output has ",
              output.numel(), " elements, expected ", size_, " x ", input.numel());
  auto work = makeWork(c10d::OpType::_ALLGATHER_BASE, {output});
  at::Tensor src = contiguousFor(*work, input, false);
  at::Tensor dst = contiguousFor(*work, output, true);
  Elements e = movedElements(src);
  nlcclComm_t c = comm();
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclAllGather(src.data_ptr(), dst.data_ptr(), e.count, e.type, c, s);
  }, "_allgather_base");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "nlccl_torch: reduce_scatter takes one input list per process");
  checkList(inputs[0], out, size_, "reduce_scatter");
  Reduction red = reduction(out, opts.reduceOp, "reduce_scatter");
  auto work = makeWork(c10d::OpType::REDUCE_SCATTER, {out});
  at::Tensor flat = pack(inputs[0]);
  work->keep(flat);
  at::Tensor dst = contiguousFor(*work, out, true);
  nlcclComm_t c = comm();
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclReduceScatter(flat.data_ptr(), dst.data_ptr(), dst.numel(), red.type, red.op, c, s);
  }, "reduce_scatter");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "_reduce_scatter_base");
  checkTensor(output, "_reduce_scatter_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "nlccl_torch: _reduce_scatter_base: output dtype ", output.scalar_type(),
              " differs from input dtype ", input.scalar_type());
  TORCH_CHECK(input.numel() == size_ * output.numel(), "nlccl_torch: _reduce_scatter_base: input has ",
              input.numel(), " elements, expected ", size_, " x ", output.numel());
  Reduction red = reduction(output, opts.reduceOp, "_reduce_scatter_base");
  auto work = makeWork(c10d::OpType::_REDUCE_SCATTER_BASE, {output});
  at::Tensor src = contiguousFor(*work, input, false);
  at::Tensor dst = contiguousFor(*work, output, true);
  nlcclComm_t c = comm();
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclReduceScatter(src.data_ptr(), dst.data_ptr(), dst.numel(), red.type, red.op, c, s);
  }, "_reduce_scatter_base");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplitSizes,
    std::vector<int64_t>& inputSplitSizes, const c10d::AllToAllOptions&) {
  checkTensor(input, "alltoall_base");
  checkTensor(output, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "nlccl_torch: alltoall_base: output dtype ", output.scalar_type(),
              " differs from input dtype ", input.scalar_type());
  auto work = makeWork(c10d::OpType::ALLTOALL_BASE, {output});
  // nlccl's all-to-all(v) is not in place: an output sharing memory with the input gets its own.
  const bool shared = output.is_alias_of(input);
  at::Tensor src = shared ? input.clone(at::MemoryFormat::Contiguous)
                          : contiguousFor(*work, input, false);
  at::Tensor dst = contiguousFor(*work, output, true);
  work->keep(src);  // the clone
  nlcclComm_t c = comm();
  Elements e = movedElements(src);
  const size_t scale = e.count == static_cast<size_t>(src.numel()) ? 1 : src.element_size();
  if (outputSplitSizes.empty() && inputSplitSizes.empty()) {
    std::vector<size_t> counts, displs;
    splitCounts(input, {}, size_, "input", &counts, &displs);
    TORCH_CHECK(output.numel() == input.numel(), "nlccl_torch: alltoall_base: output has ",
                output.numel(), " elements, input ", input.numel());
    const size_t count = counts[0] * scale;
    queue_->post(work, [=](nlcclStream_t s) {
      return nlcclAlltoAll(src.data_ptr(), dst.data_ptr(), count, e.type, c, s);
    }, "alltoall_base");
    return work;
  }
  std::vector<size_t> sc, sd, rc, rd;
  splitCounts(input, inputSplitSizes, size_, "input", &sc, &sd);
  splitCounts(output, outputSplitSizes, size_, "output", &rc, &rd);
  for (auto* v : {&sc, &sd, &rc, &rd})
    for (size_t& x : *v) x *= scale;
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclAlltoAllv(src.data_ptr(), sc.data(), sd.data(), dst.data_ptr(), rc.data(),
                          rd.data(), e.type, c, s);
  }, "alltoall_base");
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNlccl::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions&) {
  TORCH_CHECK(inputs.size() == static_cast<size_t>(size_) &&
                  outputs.size() == static_cast<size_t>(size_),
              "nlccl_torch: alltoall needs one input and one output tensor per rank (", size_,
              "), got ", inputs.size(), " and ", outputs.size());
  for (const auto* list : {&inputs, &outputs})
    for (const at::Tensor& t : *list) {
      checkTensor(t, "alltoall");
      TORCH_CHECK(t.scalar_type() == inputs[0].scalar_type(),
                  "nlccl_torch: alltoall: tensors must have one dtype, got ", t.scalar_type(),
                  " and ", inputs[0].scalar_type());
    }
  auto work = makeWork(c10d::OpType::ALLTOALL, outputs);
  at::Tensor src = pack(inputs);
  int64_t outTotal = 0;
  for (const at::Tensor& o : outputs) outTotal += o.numel();
  at::Tensor dst = at::empty({outTotal}, inputs[0].options());
  work->keep(src);
  work->keep(dst);
  unpackInto(*work, dst, outputs);
  Elements e = movedElements(src);
  const size_t scale = e.count == static_cast<size_t>(src.numel()) ? 1 : src.element_size();
  std::vector<size_t> sc, sd, rc, rd;
  size_t sAt = 0, rAt = 0;
  for (int r = 0; r < size_; ++r) {
    sc.push_back(inputs[r].numel() * scale);
    sd.push_back(sAt);
    sAt += sc.back();
    rc.push_back(outputs[r].numel() * scale);
    rd.push_back(rAt);
    rAt += rc.back();
  }
  nlcclComm_t c = comm();
  queue_->post(work, [=](nlcclStream_t s) {
    return nlcclAlltoAllv(src.data_ptr(), sc.data(), sd.data(), dst.data_ptr(), rc.data(),
                          rd.data(), e.type, c, s);
  }, "alltoall");
  return work;
}

}  // namespace nlccl_torch

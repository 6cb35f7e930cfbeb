// PreMulSum (nlcclRedOpCreatePreMulSum): each rank scales its input by the operator's scalar,
// then the collective sums. The scaled copy is made when the call runs (a queued call sees the
// input as it is then, and a nlcclScalarDevice scalar as it is then), into memory the call owns,
// so the Plan runs out of place from it and the user's buffers keep NCCL's in-place meaning.
#include <cstring>

#include "core/collective.hpp"
#include "kernels/scale.hpp"
#include "util/log.hpp"

namespace nlccl::core {

Status applyCustomOp(Communicator* comm, CollArgs* a, std::optional<CollExtras>* extras) {
  const int value = static_cast<int>(a->op);
  std::optional<PreMulSum> op = comm->resources().op(value);
  if (!op) {
    WARN("%s: op %d is neither a built-in nlcclRedOp_t nor an operator created on this "
         "communicator (or it was destroyed)",
         collectiveName(a->collective), value);
    return Status::InvalidArgument;
  }
  if (op->dtype != a->dtype) {
    WARN("%s: op %d was created for datatype %s, the call uses %s", collectiveName(a->collective),
         value, dataTypeName(op->dtype), dataTypeName(a->dtype));
    return Status::InvalidArgument;
  }
  plan::Request req;
  req.collective = a->collective;
  req.nranks = comm->nranks();
  req.count = a->count;
  req.root = a->root;
  const size_t es = dataTypeSize(a->dtype);
  const size_t n = plan::inputCount(req, comm->rank());
  auto scaled = std::shared_ptr<char>(new char[n * es + 1], std::default_delete<char[]>());
  const void* src = a->send;
  char* dst = scaled.get();
  const DataType t = a->dtype;
  PreMulSum o = *op;
  CollExtras& x = extras->emplace();
  x.prepareInput = [=] {
    if (n == 0) return;
    kernels::scaleCopy(t, dst, src, n, o.immediate ? o.value : o.pointer);
  };
  x.keepAlive = std::move(scaled);
  a->extras = &x;
  a->send = dst;
  a->op = RedOp::Sum;
  return Status::Success;
}

}  // namespace nlccl::core

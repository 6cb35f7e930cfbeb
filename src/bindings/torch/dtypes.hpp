// How torch tensors and reduce ops map onto nlccl's element types and operators, and the checks
// every operation makes on its tensors before anything is queued.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <string>

#include "nlccl.h"

namespace nlccl_torch {

/// A tensor's memory as nlccl sees it: element type and element count.
struct Elements {
  nlcclDataType_t type;
  size_t count;
};

/// A reduction as nlccl runs it.
struct Reduction {
  nlcclDataType_t type;
  nlcclRedOp_t op;
};

/// Elements to move for a data-movement operation (broadcast, gather, all-to-all, send, ...):
/// tensors of a type nlccl knows keep it; any other type (int16, complex, ...) moves as bytes.
Elements movedElements(const at::Tensor& t);

/// The nlccl type and operator of reducing `t` with `op` in operation `what`. Raises a
/// RuntimeError naming the operation, the dtype or op and what nlccl supports when there is no
/// such reduction. bool reduces as NCCL's backend does it: SUM and MAX are logical or (max),
/// PRODUCT and MIN are logical and (min).
Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& op, const char* what);

/// Name of a reduce op as Python spells it (ReduceOp.SUM, ...).
std::string reduceOpName(const c10d::ReduceOp& op);

/// Raises unless `t` is a dense CPU tensor; `what` names the operation in the message.
void checkTensor(const at::Tensor& t, const char* what);

/// Raises unless `tensors` holds exactly one tensor (which it returns), checked as above.
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what);

/// Raises unless `t` has the dtype and element count of `like`.
void checkSameKind(const at::Tensor& t, const at::Tensor& like, const char* what);

}  // namespace nlccl_torch

#include "dtypes.hpp"

#include <c10/util/Exception.h>

namespace nlccl_torch {

namespace {

constexpr const char* kReducedTypes =
    "uint8, int8, int32, int64, float16, bfloat16, float32, float64 and bool";

/// nlccl's element type for a torch dtype, if nlccl has one.
bool nlcclType(at::ScalarType s, nlcclDataType_t* out) {
  switch (s) {
    case at::kByte: *out = nlcclUint8; return true;
    case at::kChar: *out = nlcclInt8; return true;
    case at::kInt: *out = nlcclInt32; return true;
    case at::kLong: *out = nlcclInt64; return true;
    case at::kHalf: *out = nlcclFloat16; return true;
    case at::kBFloat16: *out = nlcclBfloat16; return true;
    case at::kFloat: *out = nlcclFloat32; return true;
    case at::kDouble: *out = nlcclFloat64; return true;
    case at::kBool: *out = nlcclUint8; return true;  // one byte, 0 or 1
    default: return false;
  }
}

}  // namespace

std::string reduceOpName(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return "ReduceOp.SUM";
    case c10d::ReduceOp::AVG: return "ReduceOp.AVG";
    case c10d::ReduceOp::PRODUCT: return "ReduceOp.PRODUCT";
    case c10d::ReduceOp::MIN: return "ReduceOp.MIN";
    case c10d::ReduceOp::MAX: return "ReduceOp.MAX";
    case c10d::ReduceOp::BAND: return "ReduceOp.BAND";
    case c10d::ReduceOp::BOR: return "ReduceOp.BOR";
    case c10d::ReduceOp::BXOR: return "ReduceOp.BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "ReduceOp.PREMUL_SUM";
    default: return "ReduceOp(" + std::to_string(static_cast<int>(op.op_)) + ")";
  }
}

Elements movedElements(const at::Tensor& t) {
  nlcclDataType_t type;
  if (nlcclType(t.scalar_type(), &type)) return {type, static_cast<size_t>(t.numel())};
  return {nlcclUint8, static_cast<size_t>(t.numel()) * t.element_size()};
}

Reduction reduction(const at::Tensor& t, const c10d::ReduceOp& op, const char* what) {
  nlcclDataType_t type;
  TORCH_CHECK(nlcclType(t.scalar_type(), &type), "nlccl_torch: ", what, " cannot reduce tensors of dtype ",
              t.scalar_type(), " (nlccl reduces ", kReducedTypes, ")");
  const bool isBool = t.scalar_type() == at::kBool;
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return {type, isBool ? nlcclMax : nlcclSum};
    case c10d::ReduceOp::PRODUCT: return {type, isBool ? nlcclMin : nlcclProd};
    case c10d::ReduceOp::MIN: return {type, nlcclMin};
    case c10d::ReduceOp::MAX: return {type, nlcclMax};
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!isBool, "nlccl_torch: ", what, " cannot average bool tensors (ReduceOp.AVG)");
      return {type, nlcclAvg};
    default:
      TORCH_CHECK(false, "nlccl_torch: ", what, " does not support ", reduceOpName(op),
                  " (nlccl reduces with SUM, PRODUCT, MIN, MAX and AVG)");
  }
}

void checkTensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "nlccl_torch: ", what, " got an undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "nlccl_torch: ", what, " needs CPU tensors, got one on ",
              t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "nlccl_torch: ", what,
              " needs dense (strided) tensors, got layout ", t.layout());
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "nlccl_torch: ", what,
              " takes exactly one tensor per process, got ", tensors.size());
  checkTensor(tensors[0], what);
  return tensors[0];
}

void checkSameKind(const at::Tensor& t, const at::Tensor& like, const char* what) {
  checkTensor(t, what);
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "nlccl_torch: ", what,
              ": tensors must have one dtype, got ", t.scalar_type(), " and ", like.scalar_type());
  TORCH_CHECK(t.numel() == like.numel(), "nlccl_torch: ", what,
              ": tensors must have the same number of elements, got ", t.numel(), " and ",
              like.numel());
}

}  // namespace nlccl_torch

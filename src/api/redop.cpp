// Custom reduction operators: nlcclRedOpCreatePreMulSum / nlcclRedOpDestroy (core/custom_op.cpp
// applies them to a collective).
#include <cstring>

#include "api/api.hpp"

using namespace nlccl;
using api::guard;

NLCCL_API nlcclResult_t nlcclRedOpCreatePreMulSum(nlcclRedOp_t* op, void* scalar,
                                                  nlcclDataType_t datatype,
                                                  nlcclScalarResidence_t residence,
                                                  nlcclComm_t comm) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  const char* func = "nlcclRedOpCreatePreMulSum";
  return guard(c, [&] {
    API_CHECK(api::checkComm(comm, func));
    if (op == nullptr) {
      WARN("%s: op is NULL", func);
      return Status::InvalidArgument;
    }
    if (scalar == nullptr) {
      WARN("%s: scalar is NULL", func);
      return Status::InvalidArgument;
    }
    API_CHECK(api::checkDataType(api::rawEnum(datatype), func));
    const int where = api::rawEnum(residence);
    if (where != nlcclScalarDevice && where != nlcclScalarHostImmediate) {
      WARN("%s: residence %d is not an nlcclScalarResidence_t (nlcclScalarDevice 0, "
           "nlcclScalarHostImmediate 1)",
           func, where);
      return Status::InvalidArgument;
    }
    core::PreMulSum m;
    m.dtype = static_cast<DataType>(api::rawEnum(datatype));
    m.immediate = where == nlcclScalarHostImmediate;
    if (m.immediate) std::memcpy(m.value, scalar, dataTypeSize(m.dtype));
    else m.pointer = scalar;
    int value = 0;
    if (c->resources().addOp(m, &value) != Status::Success) {
      WARN("%s: every operator value up to nlcclMaxRedOp is in use", func);
      return Status::InvalidUsage;
    }
    *op = static_cast<nlcclRedOp_t>(value);
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclRedOpDestroy(nlcclRedOp_t op, nlcclComm_t comm) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  return guard(c, [&] {
    API_CHECK(api::checkComm(comm, "nlcclRedOpDestroy"));
    const int value = api::rawEnum(op);
    if (value < nlcclNumOps) {
      WARN("nlcclRedOpDestroy: op %d is a built-in operator", value);
      return Status::InvalidArgument;
    }
    if (!c->resources().removeOp(value)) {
      WARN("nlcclRedOpDestroy: op %d was not created on this communicator (or was destroyed "
           "already)",
           value);
      return Status::InvalidArgument;
    }
    return Status::Success;
  });
}

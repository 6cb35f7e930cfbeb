// Streams and shared memory allocation.
#include "api/api.hpp"

using namespace nlccl;
using api::guard;

NLCCL_API nlcclResult_t nlcclStreamCreate(nlcclStream_t* stream) {
  return guard(nullptr, [&] {
    if (stream == nullptr) {
      WARN("nlcclStreamCreate: stream is NULL");
      return Status::InvalidArgument;
    }
    *stream = reinterpret_cast<nlcclStream_t>(new core::Stream());
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclStreamSynchronize(nlcclStream_t stream) {
  return guard(nullptr, [&] {
    if (stream == nullptr) return Status::Success;  // the NULL stream is always idle
    return api::toStream(stream)->synchronize();
  });
}

NLCCL_API nlcclResult_t nlcclStreamQuery(nlcclStream_t stream) {
  return guard(nullptr, [&] {
    if (stream == nullptr) return Status::Success;
    return api::toStream(stream)->query();
  });
}

NLCCL_API nlcclResult_t nlcclStreamDestroy(nlcclStream_t stream) {
  return guard(nullptr, [&] {
    delete api::toStream(stream);
    return Status::Success;
  });
}

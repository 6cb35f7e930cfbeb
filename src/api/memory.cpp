// nlcclMemAlloc / nlcclMemFree.
#include <cstdlib>

#include "api/api.hpp"

using namespace nlccl;
using api::guard;

NLCCL_API nlcclResult_t nlcclMemAlloc(void** ptr, size_t size) {
  return guard(nullptr, [&] {
    if (ptr == nullptr) {
      WARN("nlcclMemAlloc: ptr is NULL");
      return Status::InvalidArgument;
    }
    if (size == 0) {
      WARN("nlcclMemAlloc: size is 0");
      return Status::InvalidArgument;
    }
    if (posix_memalign(ptr, 4096, size) != 0) {
      WARN("nlcclMemAlloc: cannot allocate %zu bytes", size);
      return Status::SystemError;
    }
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclMemFree(void* ptr) {
  return guard(nullptr, [&] {
    free(ptr);
    return Status::Success;
  });
}

// nlcclMemAlloc / nlcclMemFree: shareable memory (util/shared_memory.hpp), so that the shm
// transport can let peers read a send buffer directly (single copy).
#include "api/api.hpp"
#include "util/shared_memory.hpp"

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
    Status s = shmem::memAlloc(size, ptr);
    if (s == Status::InvalidArgument)
      WARN("nlcclMemAlloc: size %zu is too large", size);
    else if (s != Status::Success)
      WARN("nlcclMemAlloc: cannot allocate %zu bytes", size);
    if (s != Status::Success) *ptr = nullptr;
    return s;
  });
}

NLCCL_API nlcclResult_t nlcclMemFree(void* ptr) {
  return guard(nullptr, [&] {
    if (ptr == nullptr) return Status::Success;
    Status s = shmem::memFree(ptr);
    if (s == Status::InvalidArgument)
      WARN("nlcclMemFree: ptr %p was not returned by nlcclMemAlloc (or was freed already)", ptr);
    return s;
  });
}

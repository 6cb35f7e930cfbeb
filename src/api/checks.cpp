#include <mutex>
#include <string>

#include "api/api.hpp"

namespace nlccl::api {

namespace {
std::mutex gMu;
std::string gLastError;
}  // namespace

void recordError(core::Communicator* comm) {
  const std::string& msg = log::lastError();
  if (comm != nullptr && comm->valid()) comm->setLastError(msg);
  std::lock_guard<std::mutex> lock(gMu);
  gLastError = msg;
}

const char* globalLastError() {
  static thread_local std::string copy;
  std::lock_guard<std::mutex> lock(gMu);
  copy = gLastError;
  return copy.c_str();
}

Status checkComm(nlcclComm_t comm, const char* func) {
  if (comm == nullptr) {
    WARN("%s: comm is NULL", func);
    return Status::InvalidArgument;
  }
  if (!toComm(comm)->valid()) {
    WARN("%s: comm is not a live communicator (destroyed or corrupt)", func);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

Status checkDataType(int t, const char* func) {
  if (t < 0 || t >= nlcclNumTypes) {
    WARN("%s: datatype %d is not a valid nlcclDataType_t (0..%d)", func, t,
         nlcclNumTypes - 1);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

Status checkRedOp(int op, const char* func) {
  if (op < 0 || op >= nlcclNumOps) {
    WARN("%s: op %d is not a valid nlcclRedOp_t (0..%d)", func, op,
         nlcclNumOps - 1);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

Status checkBuffer(const void* ptr, size_t count, const char* name, const char* func) {
  if (ptr == nullptr && count > 0) {
    WARN("%s: %s is NULL", func, name);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

Status checkCount(size_t count, size_t factor, int t, const char* name,
                  const char* func) {
  size_t es = dataTypeSize(static_cast<DataType>(t));
  size_t bytes;
  if (__builtin_mul_overflow(count, factor, &bytes) || __builtin_mul_overflow(bytes, es, &bytes) ||
      bytes > (size_t{1} << 62)) {
    WARN("%s: %s %zu is too large (the buffer size overflows)", func, name, count);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

Status checkRank(int r, int nranks, const char* name, const char* func) {
  if (r < 0 || r >= nranks) {
    WARN("%s: %s %d is out of range (the communicator has %d ranks)", func, name, r, nranks);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

Status checkActive(nlcclComm_t comm, const char* func) {
  if (toComm(comm)->suspended()) {
    WARN("%s: comm is suspended (nlcclCommResume it first)", func);
    return Status::InvalidUsage;
  }
  return Status::Success;
}

}  // namespace nlccl::api

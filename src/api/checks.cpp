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

namespace fail {

Status nullComm(const char* func) {
  WARN("%s: comm is NULL", func);
  return Status::InvalidArgument;
}

Status deadComm(const char* func) {
  WARN("%s: comm is not a live communicator (destroyed or corrupt)", func);
  return Status::InvalidArgument;
}

Status dataType(int t, const char* func) {
  WARN("%s: datatype %d is not a valid nlcclDataType_t (0..%d)", func, t, nlcclNumTypes - 1);
  return Status::InvalidArgument;
}

Status redOp(int op, const char* func) {
  WARN("%s: op %d is not a valid nlcclRedOp_t (0..%d)", func, op, nlcclNumOps - 1);
  return Status::InvalidArgument;
}

Status nullBuffer(const char* name, const char* func) {
  WARN("%s: %s is NULL", func, name);
  return Status::InvalidArgument;
}

Status count(size_t count, const char* name, const char* func) {
  WARN("%s: %s %zu is too large (the buffer size overflows)", func, name, count);
  return Status::InvalidArgument;
}

Status rank(int r, int nranks, const char* name, const char* func) {
  WARN("%s: %s %d is out of range (the communicator has %d ranks)", func, name, r, nranks);
  return Status::InvalidArgument;
}

Status suspended(const char* func) {
  WARN("%s: comm is suspended (nlcclCommResume it first)", func);
  return Status::InvalidUsage;
}

}  // namespace fail

}  // namespace nlccl::api

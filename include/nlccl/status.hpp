// Result codes of nlccl, shared by the C++ model API and the library's internals. Values equal
// nlcclResult_t's (nlccl.h), so the C API converts with a cast.
#pragma once

namespace nlccl {

enum class Status : int {
  Success = 0,
  SystemError = 2,     ///< the operating system refused (a file that cannot be written, ...)
  InternalError = 3,
  InvalidArgument = 4,  ///< a bad argument; the accompanying message says which
  InvalidUsage = 5,
  RemoteError = 6,
  InProgress = 7,
  Timeout = 8,
};

/// "success", "invalid argument", ...
constexpr const char* statusName(Status s) {
  switch (s) {
    case Status::Success: return "success";
    case Status::SystemError: return "system error";
    case Status::InternalError: return "internal error";
    case Status::InvalidArgument: return "invalid argument";
    case Status::InvalidUsage: return "invalid usage";
    case Status::RemoteError: return "remote error";
    case Status::InProgress: return "in progress";
    case Status::Timeout: return "timeout";
  }
  return "unknown";
}

}  // namespace nlccl

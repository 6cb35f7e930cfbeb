// Result codes (the public nlccl/status.hpp; values equal nlcclResult_t's, but nothing below
// src/api includes nlccl.h) and the one propagation macro.
#pragma once

#include "nlccl/status.hpp"

namespace nlccl {

/// Errors after which a communicator must not be used again (NCCL's semantics).
inline bool isFatal(Status s) {
  return s == Status::SystemError || s == Status::InternalError || s == Status::RemoteError ||
         s == Status::Timeout;
}

}  // namespace nlccl

/// Propagates a non-success Status, logging the call site at INFO (a backtrace with NLCCL_DEBUG=INFO).
#define NLCHECK(call)                                                                   \
  do {                                                                                  \
    ::nlccl::Status nlcheck_s_ = (call);                                                \
    if (nlcheck_s_ != ::nlccl::Status::Success && nlcheck_s_ != ::nlccl::Status::InProgress) { \
      ::nlccl::log::trail(__FILE__, __LINE__, __func__, nlcheck_s_);                    \
      return nlcheck_s_;                                                                \
    }                                                                                   \
  } while (0)

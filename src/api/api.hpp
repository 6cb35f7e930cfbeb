// Shared by the C entry points: the exception firewall, handle conversion and argument checks.
// Every check that fails logs a WARN naming the argument; that text becomes the communicator's
// last error (nlcclGetLastError).
#pragma once

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "nlccl.h"
#include "core/comm.hpp"
#include "core/stream.hpp"
#include "util/dtype.hpp"
#include "util/log.hpp"

#define NLCCL_API extern "C" __attribute__((visibility("default")))

namespace nlccl::api {

inline nlcclResult_t toResult(Status s) { return static_cast<nlcclResult_t>(s); }
inline core::Communicator* toComm(nlcclComm_t c) { return reinterpret_cast<core::Communicator*>(c); }
inline nlcclComm_t toHandle(core::Communicator* c) { return reinterpret_cast<nlcclComm_t>(c); }
inline core::Stream* toStream(nlcclStream_t s) { return reinterpret_cast<core::Stream*>(s); }

/// Records the calling thread's last WARN as the last error of `comm` (and globally).
void recordError(core::Communicator* comm);
/// The last error of calls that had no valid communicator.
const char* globalLastError();

/// Runs `body` (returning Status) with log::lastError cleared first; exceptions become
/// InternalError (or SystemError for bad_alloc); failures are recorded on `comm`.
template <typename F>
nlcclResult_t guard(core::Communicator* comm, F&& body) {
  log::clearLastError();
  Status s;
  try {
    s = body();
  } catch (const std::bad_alloc&) {
    WARN("out of memory");
    s = Status::SystemError;
  } catch (const std::exception& e) {
    WARN("internal error: %s", e.what());
    s = Status::InternalError;
  } catch (...) {
    WARN("internal error: unknown exception");
    s = Status::InternalError;
  }
  if (s != Status::Success && s != Status::InProgress) recordError(comm);
  return toResult(s);
}

/// guard() for calls that may block on peers (collectives, send/recv, split): the communicator
/// stays alive until the call has returned, its error recorded included, so nlcclCommAbort from
/// another thread (which waits for pending work) cannot free it under the call it unblocks.
/// A body that takes a `bool*` may hand the hold over to work it queued (core::CollArgs::
/// heldByCaller): it clears the flag, and must not touch the communicator afterwards.
template <typename F>
nlcclResult_t guardBlocking(core::Communicator* comm, F&& body) {
  struct Hold {
    core::Communicator* c = nullptr;
    bool held = false;
    ~Hold() {
      if (held) c->removePending();
    }
  } hold;
  if (comm != nullptr && comm->valid()) {
    comm->addPending();
    hold.c = comm;
    hold.held = true;
  }
  if constexpr (std::is_invocable_v<F, bool*>) {
    return guard(comm, [&] { return body(&hold.held); });
  } else {
    return guard(comm, std::forward<F>(body));
  }
}

/// An enum argument's value read from its bytes. Callers may pass any int, and loading a C enum
/// whose value lies outside its enumerators' range is undefined in C++ (UBSan's -fsanitize=enum).
template <typename E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

/// The WARN and the failure of each check below, out of line (the checks themselves are inline:
/// every call makes them).
namespace fail {
Status nullComm(const char* func);
Status deadComm(const char* func);
Status dataType(int t, const char* func);
Status redOp(int op, const char* func);
Status nullBuffer(const char* name, const char* func);
Status count(size_t count, const char* name, const char* func);
Status rank(int r, int nranks, const char* name, const char* func);
Status suspended(const char* func);
}  // namespace fail

/// InvalidArgument unless `comm` is a live communicator.
inline Status checkComm(nlcclComm_t comm, const char* func) {
  if (comm == nullptr) [[unlikely]] return fail::nullComm(func);
  if (!toComm(comm)->valid()) [[unlikely]] return fail::deadComm(func);
  return Status::Success;
}
/// The rules of the checks below, for callers that test without reporting (api::endsEmpty).
/// `t` and `op` are enum arguments read with rawEnum().
inline bool validDataType(int t) { return t >= 0 && t < nlcclNumTypes; }
inline bool validRedOp(int op) { return op >= 0 && op < nlcclNumOps; }
inline bool validRank(int r, int nranks) { return r >= 0 && r < nranks; }

inline Status checkDataType(int t, const char* func) {
  if (!validDataType(t)) [[unlikely]] return fail::dataType(t, func);
  return Status::Success;
}
inline Status checkRedOp(int op, const char* func) {
  if (!validRedOp(op)) [[unlikely]] return fail::redOp(op, func);
  return Status::Success;
}
/// InvalidArgument when `ptr` is null while `count` elements are to be read or written.
inline Status checkBuffer(const void* ptr, size_t count, const char* name, const char* func) {
  if (ptr == nullptr && count > 0) [[unlikely]] return fail::nullBuffer(name, func);
  return Status::Success;
}
/// InvalidArgument when count * factor * element size overflows size_t (or passes 2^62). Call
/// after checkDataType.
inline Status checkCount(size_t count, size_t factor, int t, const char* name, const char* func) {
  const size_t es = dataTypeSize(static_cast<DataType>(t));
  size_t bytes;
  if (__builtin_mul_overflow(count, factor, &bytes) || __builtin_mul_overflow(bytes, es, &bytes) ||
      bytes > (size_t{1} << 62)) [[unlikely]]
    return fail::count(count, name, func);
  return Status::Success;
}
inline Status checkRank(int r, int nranks, const char* name, const char* func) {
  if (!validRank(r, nranks)) [[unlikely]] return fail::rank(r, nranks, name, func);
  return Status::Success;
}
/// InvalidUsage while `comm` is suspended (nlcclCommSuspend). Call after checkComm.
inline Status checkActive(nlcclComm_t comm, const char* func) {
  if (toComm(comm)->suspended()) [[unlikely]] return fail::suspended(func);
  return Status::Success;
}

/// The configuration of a new communicator: the environment's defaults with the fields of
/// `cfg` (NULL: none) on top. InvalidArgument, naming the field, for a value out of range.
Status applyConfig(const nlcclConfig_t* cfg, core::CommConfig* out, const char* func);

}  // namespace nlccl::api

#define API_CHECK(call)                                     \
  do {                                                      \
    ::nlccl::Status api_s_ = (call);                        \
    if (api_s_ != ::nlccl::Status::Success) return api_s_;  \
  } while (0)

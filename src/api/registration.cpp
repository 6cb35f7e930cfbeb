// Buffer registration (nlcclCommRegister) and windows (nlcclCommWindowRegister): what a
// communicator records about user memory. nlcclMemAlloc memory is read by same-host peers
// directly (one copy) whether registered or not; other memory is recorded and takes the
// shared-memory FIFOs (two copies), see the README.
#include "api/api.hpp"

using namespace nlccl;
using api::guard;

namespace {

Status checkRegion(nlcclComm_t comm, const void* buff, size_t size, const void* out,
                   const char* outName, const char* func) {
  API_CHECK(api::checkComm(comm, func));
  API_CHECK(api::checkActive(comm, func));
  if (buff == nullptr) {
    WARN("%s: buff is NULL", func);
    return Status::InvalidArgument;
  }
  if (size == 0) {
    WARN("%s: size is 0", func);
    return Status::InvalidArgument;
  }
  if (reinterpret_cast<uintptr_t>(buff) + size < reinterpret_cast<uintptr_t>(buff)) {
    WARN("%s: buff %p + size %zu wraps around the address space", func, buff, size);
    return Status::InvalidArgument;
  }
  if (out == nullptr) {
    WARN("%s: %s is NULL", func, outName);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

}  // namespace

NLCCL_API nlcclResult_t nlcclCommRegister(const nlcclComm_t comm, void* buff, size_t size,
                                          void** handle) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  return guard(c, [&] {
    API_CHECK(checkRegion(comm, buff, size, handle, "handle", "nlcclCommRegister"));
    core::Registration r;
    r.ptr = buff;
    r.bytes = size;
    *handle = c->resources().add(r);
    INFO(log::kInit, "rank %d: registered %zu bytes at %p", c->rank(), size, buff);
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommDeregister(const nlcclComm_t comm, void* handle) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  return guard(c, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommDeregister"));
    if (handle == nullptr) {
      WARN("nlcclCommDeregister: handle is NULL");
      return Status::InvalidArgument;
    }
    if (!c->resources().remove(handle, false)) {
      WARN("nlcclCommDeregister: handle %p was not returned by nlcclCommRegister on this "
           "communicator (or was deregistered already)",
           handle);
      return Status::InvalidArgument;
    }
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommWindowRegister(nlcclComm_t comm, void* buff, size_t size,
                                                nlcclWindow_t* win, int winFlags) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  return guard(c, [&] {
    const char* func = "nlcclCommWindowRegister";
    API_CHECK(checkRegion(comm, buff, size, win, "win", func));
    const int known = NLCCL_WIN_COLL_SYMMETRIC | NLCCL_WIN_STRICT_ORDERING | NLCCL_WIN_GIN_ONLY;
    if ((winFlags & ~known) != 0) {
      WARN("%s: winFlags 0x%x has bits that are no NLCCL_WIN_* flag (valid: 0x%x)", func,
           winFlags, known);
      return Status::InvalidArgument;
    }
    core::Registration r;
    r.ptr = buff;
    r.bytes = size;
    r.flags = winFlags;
    r.window = true;
    *win = static_cast<nlcclWindow_t>(c->resources().add(r));
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclCommWindowDeregister(nlcclComm_t comm, nlcclWindow_t win) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  return guard(c, [&] {
    API_CHECK(api::checkComm(comm, "nlcclCommWindowDeregister"));
    if (win == nullptr) {
      WARN("nlcclCommWindowDeregister: win is NULL");
      return Status::InvalidArgument;
    }
    if (!c->resources().remove(win, true)) {
      WARN("nlcclCommWindowDeregister: win %p is not a window of this communicator (or was "
           "deregistered already)",
           static_cast<void*>(win));
      return Status::InvalidArgument;
    }
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclWinGetUserPtr(nlcclComm_t comm, nlcclWindow_t win, void** outUserPtr) {
  core::Communicator* c = comm ? api::toComm(comm) : nullptr;
  return guard(c, [&] {
    API_CHECK(api::checkComm(comm, "nlcclWinGetUserPtr"));
    if (outUserPtr == nullptr) {
      WARN("nlcclWinGetUserPtr: outUserPtr is NULL");
      return Status::InvalidArgument;
    }
    std::optional<core::Registration> r =
        win ? c->resources().find(win, true) : std::nullopt;
    if (!r) {
      WARN("nlcclWinGetUserPtr: win %p is not a window of this communicator",
           static_cast<void*>(win));
      return Status::InvalidArgument;
    }
    *outUserPtr = r->ptr;
    return Status::Success;
  });
}

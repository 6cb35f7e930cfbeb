// Shareable host memory: nlcclMemAlloc's buffers (which the shm transport reads directly, single
// copy), the neuronlink transport's shared timeline, and mappings of peers' allocations.
//
// Every allocation is its own memfd (mode 0600, sealed against shrinking, so a reader can never
// take SIGBUS), mapped MAP_SHARED and kept open for the life of the allocation. A memfd has no
// name in /dev/shm, so nothing is left behind whatever happens to the process. (Without memfd,
// shm_open + immediate shm_unlink is the fallback.) The process-wide registry maps pointer ranges
// to {fd, offset, size, id}; the shm transport looks a send's buffer up there and, when it lies
// wholly inside one allocation, sends a descriptor instead of the data. The receiver opens the
// sender's /proc/<pid>/fd/<fd> (allowed for the same user), checks that it is the allocation the
// descriptor names (the memfd's name carries the 64-bit id), maps it read-only and caches the
// mapping per (peer, id).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "util/status.hpp"

namespace nlccl::shmem {

/// Allocates `size` bytes (page granular, zero-filled) of shareable memory into *ptr. With
/// `reserve`, the pages are allocated now (posix_fallocate): a full tmpfs fails here, with a
/// message, instead of faulting on first touch.
Status memAlloc(size_t size, void** ptr, bool reserve = false);
/// Unmaps an allocation made by memAlloc. InvalidArgument (nothing logged) when `ptr` is not the
/// start of a live allocation; the caller names the argument in its message.
Status memFree(void* ptr);

/// Where a buffer lies inside a registered allocation.
struct AllocationRef {
  uint64_t id = 0;      ///< unique per allocation (random high bits, counter low bits)
  int fd = -1;          ///< the allocating process's descriptor of the memory object
  uint64_t offset = 0;  ///< of the buffer from the allocation's start
  uint64_t size = 0;    ///< of the whole allocation (page multiple)
};

/// True when [ptr, ptr + bytes) lies wholly inside one live allocation; fills *out.
bool findAllocation(const void* ptr, size_t bytes, AllocationRef* out);

/// A mapping of a peer's allocation (read-only unless asked). Movable; unmaps on destruction.
class RemoteMapping {
 public:
  RemoteMapping() = default;
  RemoteMapping(RemoteMapping&& o) noexcept { *this = std::move(o); }
  RemoteMapping& operator=(RemoteMapping&& o) noexcept;
  ~RemoteMapping() { unmap(); }

  /// Maps allocation `id` (of `size` bytes, descriptor `fd`) of process `pid`, for reading, or
  /// for reading and writing. RemoteError (with a log line) when the process no longer holds
  /// that allocation (it exited, is exiting, or freed it); SystemError when this process cannot
  /// open or map it (out of descriptors or memory, not allowed to, no /proc).
  static Status open(pid_t pid, int fd, uint64_t id, uint64_t size, RemoteMapping* out,
                     bool writable = false);
  void unmap();
  /// Gives up the mapping without unmapping it (the caller now owns [data, data + size)).
  void release() {
    base_ = nullptr;
    size_ = 0;
  }
  const char* data() const { return base_; }
  char* writableData() const { return base_; }
  uint64_t size() const { return size_; }
  /// Fills this process's page tables for [offset, offset + bytes) ahead of reading it (one
  /// call instead of a fault per 4 KiB). The range filled so far is remembered, so a range read
  /// again costs a comparison.
  void populate(uint64_t offset, uint64_t bytes);

 private:
  char* base_ = nullptr;
  uint64_t size_ = 0;
  uint64_t popLo_ = 0, popHi_ = 0;  ///< page-aligned range already populated
};

}  // namespace nlccl::shmem

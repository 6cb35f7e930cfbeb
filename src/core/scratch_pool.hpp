// Scratch memory for collectives, reused across calls. A fresh allocation per call costs a page
// fault per 4 KiB on first touch (on this VM a ring reduce-scatter of 8 MiB spent most of its
// time there); a lease returns its buffer to the pool when the collective's Work is done, so
// concurrent collectives of one communicator never share a buffer.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace nlccl::core {

class ScratchPool : public std::enable_shared_from_this<ScratchPool> {
 public:
  /// At least `bytes` of uninitialised memory (nullptr for 0), back in the pool when released.
  std::shared_ptr<char> lease(size_t bytes);
  /// Buffers kept for reuse (for tests).
  size_t idle() const;
  /// Their bytes; trim frees them (leases in use are not affected).
  size_t idleBytes() const;
  void trim();

 private:
  struct Buffer {
    size_t bytes;
    std::unique_ptr<char[]> data;
  };
  void giveBack(Buffer b);

  static constexpr size_t kMaxIdle = 4;  ///< buffers kept; more concurrent calls allocate anew
  mutable std::mutex mu_;
  std::vector<Buffer> idle_;
};

}  // namespace nlccl::core

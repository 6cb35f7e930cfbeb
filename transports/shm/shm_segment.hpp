// The shared-memory segment of one receiving rank (DESIGN.md section 5): a header with the rank's
// doorbell (the futex word its waits block on), then one FIFO of fixed-size slots per sending peer.
//
// One segment per receiving rank, not per pair: a rank blocks on a single futex word whatever peer
// it waits for (a thread cannot sleep on several futexes), senders ring that word after writing a
// slot and receivers ring the sender's word after freeing one. It also means n segments, not n^2.
//
// A segment is shareable memory with no name (util/shared_memory.hpp: a memfd its owner keeps
// open; peers map it through /proc/<pid>/fd), so a rank killed at any moment, set-up included,
// leaves nothing in /dev/shm.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "util/shared_memory.hpp"
#include "util/status.hpp"

namespace nlccl::transport::shm {

constexpr uint64_t kSegmentMagic = 0x336d68736c63636eull;  // "nlcclshm3"
constexpr size_t kCacheLine = 64;

/// SlotHeader::flags: the payload is a DirectDescriptor, not data (single copy).
constexpr uint64_t kSlotDirect = 1;

/// Describes one fragment; written by the sender before it publishes the slot.
struct SlotHeader {
  uint64_t tag;
  uint64_t total;   ///< bytes of the whole message
  uint64_t offset;  ///< where this fragment starts in the message
  uint64_t bytes;   ///< bytes in this fragment's payload (a direct message: all of them)
  uint64_t flags;   ///< kSlotDirect or 0
  uint32_t seq;     ///< the pair's message number (first fragment; see shm.hpp, "Order")
  uint32_t pad;
};

/// One cache line of a pair's LL FIFO (NCCL's LL/LL128 idea: data and flag in one line, so a
/// small message reaches the receiver in one line transfer per line and nothing else is
/// published). The writer stores a line's data, then its flag (release); line i of the FIFO (a
/// count that only grows) is valid once its flag reads i + 1 (acquire). Flags only grow and data
/// never lies where a flag does, so a line left from an earlier lap never matches.
struct alignas(kCacheLine) LLLine {
  static constexpr size_t kData = 56;
  unsigned char data[kData];
  std::atomic<uint64_t> flag;
};
static_assert(sizeof(LLLine) == kCacheLine);

/// The first 16 bytes of a record's first line; the message's data follows, kLLFirst bytes in
/// the first line and LLLine::kData in each line after it.
struct LLHead {
  uint64_t tag;
  uint32_t seq;    ///< the pair's message number
  uint32_t bytes;  ///< of the message
};
constexpr size_t kLLFirst = LLLine::kData - sizeof(LLHead);
static_assert(kLLFirst % 8 == 0 && LLLine::kData % 8 == 0, "lines hold whole elements");
/// Largest LL message any rank sends (NLCCL_SHM_LL_BYTES is capped to it).
constexpr uint64_t kLLMaxBytes = 64 * 1024;
/// Lines of an LL record carrying `bytes`.
inline uint64_t llLinesFor(size_t bytes) {
  return bytes <= kLLFirst ? 1 : 1 + (bytes - kLLFirst + LLLine::kData - 1) / LLLine::kData;
}

/// Where a range of a process's nlcclMemAlloc memory lies.
struct AllocRange {
  uint64_t allocId;    ///< the allocation's unique id
  uint64_t allocSize;  ///< bytes of the whole allocation
  uint64_t offset;     ///< of the range in the allocation
  int32_t fd;          ///< the owner's descriptor of the allocation (/proc/<pid>/fd/<fd>)
  int32_t pad;
};

/// Payload of a direct slot: where the sender's data lies in its nlcclMemAlloc allocation.
/// The receiver reads it from there and then bumps RingControl::acked.
/// kDirectSplit: the send of an exchange pair (transport.hpp, Request::pairTarget) whose
/// receive's buffer is `target`. A receiver whose own receive of the pair is split too reduces
/// only its half (the lower rank the first), stores it in its buffer and at `target`, and acks
/// once both are written; otherwise it receives the whole message as usual. Such a descriptor
/// never moves to the unexpected queue: the sender would take the ack for a split.
struct DirectDescriptor {
  uint64_t magic;  ///< kDirectMagic
  AllocRange data;
  uint64_t flags;  ///< kDirectSplit or 0
  AllocRange target;  ///< with kDirectSplit
};
constexpr uint64_t kDirectSplit = 1;
constexpr uint64_t kDirectMagic = 0x7463657269646c6eull;

/// Single-producer single-consumer FIFO control: counters only grow, slot = index % slots.
struct RingControl {
  alignas(kCacheLine) std::atomic<uint64_t> head;  ///< fragments published (sender writes)
  alignas(kCacheLine) std::atomic<uint64_t> tail;  ///< fragments consumed (receiver writes)
  /// Direct messages the receiver has finished reading (receiver writes, in FIFO order): the
  /// sender's buffer is free again up to this count.
  std::atomic<uint64_t> acked;
  /// LL FIFO lines consumed (receiver writes; the sender reads it when the FIFO looks full).
  alignas(kCacheLine) std::atomic<uint64_t> llTail;
  /// Set by the sender when it waits for LL space; the receiver clears it and rings the sender's
  /// doorbell once it has freed some (otherwise consuming LL records rings nothing).
  alignas(kCacheLine) std::atomic<uint32_t> llSenderWaits;
};

struct alignas(kCacheLine) SegmentHeader {
  uint64_t magic;
  uint32_t nranks;
  uint32_t owner;  ///< the receiving rank
  uint32_t slots;
  uint32_t llLines;  ///< lines per LL FIFO (a power of two)
  uint64_t slotBytes;
  uint64_t totalBytes;
  alignas(kCacheLine) std::atomic<uint32_t> epoch;   ///< doorbell: bumped on every event
  std::atomic<uint32_t> sleepers;                    ///< owner threads blocked on `epoch`
  alignas(kCacheLine) std::atomic<uint32_t> mapped;  ///< peers that have mapped the segment
  std::atomic<int32_t> aborted;                      ///< owner's abort status, 0 while healthy
};

/// One mapping of a segment (own or a peer's). Movable, unmaps on destruction.
class Segment {
 public:
  Segment() = default;
  Segment(Segment&& o) noexcept { *this = std::move(o); }
  Segment& operator=(Segment&& o) noexcept;
  ~Segment() { unmap(); }

  /// Allocates (mode 0600, pages reserved) and maps a new segment; where() tells peers how to
  /// map it.
  /// `llLines` must be a power of two.
  static Status create(int nranks, int owner, uint32_t slots, uint64_t slotBytes,
                       uint32_t llLines, Segment* out);
  /// Maps process `pid`'s segment `where` and checks its header against `nranks` / `owner`.
  static Status open(int pid, const shmem::AllocationRef& where, int nranks, int owner,
                     Segment* out);
  /// The allocation behind a segment made by create().
  const shmem::AllocationRef& where() const { return where_; }
  /// Bytes needed for a segment of this geometry.
  static size_t sizeFor(int nranks, uint32_t slots, uint64_t slotBytes, uint32_t llLines);

  void unmap();
  bool valid() const { return base_ != nullptr; }
  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  uint32_t slots() const { return header()->slots; }
  uint64_t slotBytes() const { return header()->slotBytes; }
  /// The FIFO that carries messages from `src` to this segment's owner.
  RingControl* ring(int src) const;
  SlotHeader* slotHeader(int src, uint64_t index) const;
  char* slotPayload(int src, uint64_t index) const;
  uint32_t llLines() const { return llLines_; }
  /// Line `index` (modulo the FIFO's length) of the LL FIFO from `src`.
  LLLine* llLine(int src, uint64_t index) const {
    return reinterpret_cast<LLLine*>(base_ + llOffset_ + ringIndex(src) * llStride_) +
           (index & (llLines_ - 1));
  }

  /// Bumps the doorbell and wakes the owner if it sleeps.
  void ringDoorbell() const;
  /// After publishing LL records: rings the doorbell only if the owner sleeps (a waiter that
  /// does not sleep watches the LL lines themselves). The fence pairs with the waiter's
  /// `sleepers` increment before its last look at the lines (Dekker).
  void wakeIfSleeping() const {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sleeping()) ringDoorbell();
  }
  /// Whether an owner thread is blocked on the doorbell; a seq_cst fence after the stores the
  /// owner should see must come first (as in wakeIfSleeping).
  bool sleeping() const { return header()->sleepers.load(std::memory_order_relaxed) > 0; }

 private:
  size_t ringIndex(int src) const { return static_cast<size_t>(src < owner_ ? src : src - 1); }
  char* base_ = nullptr;
  size_t size_ = 0;
  bool owned_ = false;          ///< made by create(): freed with shmem::memFree
  shmem::AllocationRef where_;  ///< create() only
  int nranks_ = 0;
  int owner_ = 0;
  size_t ctrlStride_ = 0;  // RingControl + slot headers, per source
  size_t payloadOffset_ = 0;
  size_t llOffset_ = 0;  // the LL FIFOs, one per source, after the payload slots
  size_t llStride_ = 0;
  uint32_t llLines_ = 0;
};

}  // namespace nlccl::transport::shm

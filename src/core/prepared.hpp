// Prepared collectives (STYLE.md 8, "the hot path"): the first call of a (collective, count,
// dtype, op, root, in place) on a communicator builds and compiles its Plan, sizes an engine
// Runner for it and its scratch memory; later calls find all of it in a flat hash table and run
// it without allocating and without a lock. Entries stay until the communicator is destroyed
// (nlcclCommSuspend frees their scratch).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "engine/engine.hpp"
#include "plan/compiled.hpp"
#include "util/dtype.hpp"

namespace nlccl::core {

struct PreparedKey {
  Collective collective = Collective::AllReduce;
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  bool inPlace = false;
  int root = 0;
  size_t count = 0;
  friend bool operator==(const PreparedKey&, const PreparedKey&) = default;
  uint64_t hash() const;
};

/// One prepared collective. `busy` makes it single-user: a second concurrent call with the same
/// key (another thread on the same communicator) takes the general path instead.
struct Prepared {
  PreparedKey key;
  std::shared_ptr<const plan::CompiledPlan> plan;
  const char* algorithm = "";  ///< the registry's name (static storage)
  int64_t sliceBytes = -1;     ///< the tuner's slice; -1: the communicator's configured one
  engine::Runner runner;
  engine::CollJob job;  ///< the runner's job: plan and the fixed fields set once (under `busy`)
  size_t scratchBytes = 0;               ///< what the Plan needs
  std::unique_ptr<char[]> scratch;       ///< kept (small Plans) or leased per call (large ones)
  std::atomic<size_t> kept{0};           ///< bytes of `scratch` (for statistics, any thread)
  std::atomic<bool> busy{false};

  /// The kept scratch, allocated on first use (call while holding `busy`); nullptr when the
  /// Plan needs none or needs more than kKeptScratch.
  char* keptScratch() {
    if (scratchBytes == 0 || scratchBytes > kKeptScratch) return nullptr;
    if (!scratch) {
      scratch.reset(new char[scratchBytes]);
      kept.store(scratchBytes, std::memory_order_relaxed);
    }
    return scratch.get();
  }

  /// Largest scratch an entry keeps between calls; larger ones are leased from the
  /// communicator's pool per call, so many prepared sizes never pin much memory.
  static constexpr size_t kKeptScratch = 1 << 20;
};

/// Open addressing over a fixed array of entry pointers: lookups are lock-free (acquire loads of
/// published entries), inserts take a mutex. Full is not an error: callers use the general path.
class PreparedTable {
 public:
  PreparedTable();
  ~PreparedTable();
  PreparedTable(const PreparedTable&) = delete;
  PreparedTable& operator=(const PreparedTable&) = delete;

  Prepared* find(const PreparedKey& key) const;
  /// Publishes `entry` (its key set) unless the key is there already or the table is full; returns
  /// the entry in the table for the key, or nullptr when full.
  Prepared* insert(std::unique_ptr<Prepared> entry);
  /// Frees kept scratch of entries not in use (nlcclCommSuspend); returns the bytes freed.
  size_t trimScratch();
  /// Bytes of scratch the entries keep.
  size_t keptBytes() const;

  static constexpr size_t kSlots = 1024;  ///< power of two; at most kSlots / 2 entries

 private:
  std::unique_ptr<std::atomic<Prepared*>[]> slots_;
  /// The entry the last find returned (a program mostly repeats one call): tried before the
  /// hash. Entries live as long as the table, so a stale pointer is still a valid entry.
  mutable std::atomic<Prepared*> last_{nullptr};
  std::mutex mu_;  ///< inserts
  size_t used_ = 0;
};

}  // namespace nlccl::core

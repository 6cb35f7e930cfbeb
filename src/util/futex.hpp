// Waiting that never starves the rank being waited for: spin briefly, yield, then block on a futex
// word (DESIGN.md 2.3). Works within a process and, with `shared`, on words in shared memory.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace nlccl {

/// Blocks while *word == expected, up to `timeout`. Returns false on timeout. Spurious wakeups
/// return true; callers recheck their condition.
bool futexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout,
               bool shared);
/// Wakes all waiters on `word`.
void futexWakeAll(std::atomic<uint32_t>* word, bool shared);

/// How long a waiter polls before it blocks: long enough that a peer on another core answering a
/// small message is seen without a sleep and a wake-up (each costs microseconds), short enough
/// that ranks outnumbering cores give the core away soon (the poll yields every few dozen
/// checks, so a peer on the same core runs meanwhile).
inline constexpr std::chrono::microseconds kSpinBeforeBlock{50};
/// How long a waiter with a core of its own polls before it starts yielding: a sched_yield
/// costs about 0.5 us on the 2-core VM (more than a whole small all-reduce), and a message that
/// lands during one is seen only after it returns. Ranks outnumbering cores yield at once. (The
/// shm transport's waits; spinWhileEqual below, used by in-process ranks that cannot tell how many
/// of them share the cores, yields from the start.)
inline constexpr std::chrono::microseconds kSpinBeforeYield{20};

/// Polls `*word` until it differs from `seen` or `budget` has passed, pausing between checks and
/// yielding the core every `yieldEvery` of them (a power of two; 1 when ranks outnumber cores, so
/// that the rank we wait for, likely on our core, runs at once). Returns whether it changed.
bool spinWhileEqual(const std::atomic<uint32_t>* word, uint32_t seen,
                    std::chrono::nanoseconds budget = kSpinBeforeBlock, uint32_t yieldEvery = 64);
/// This process's affinity as a bit mask (CPU i is bit i % 64 of word i / 64; CPUs past
/// kCpuMaskWords * 64 are left out), for ranks to tell each other where they may run.
constexpr int kCpuMaskWords = 16;
struct CpuMask {
  uint64_t bits[kCpuMaskWords] = {};
};
CpuMask affinityMask();
/// CPUs in the union of `masks`, at least 1: the cores a group of ranks shares. A launcher that
/// binds each rank to a core of its own (mpirun's default) gives every rank a one-CPU affinity,
/// yet the ranks do not outnumber the cores; ranks all bound to one core do.
int cpusInUnion(const CpuMask* masks, int n);

/// An event counter: waiters remember epoch(), do a check, then wait(epoch) if nothing is ready.
/// notify() bumps the epoch and wakes waiters only when someone is blocked.
class Notifier {
 public:
  uint32_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  void notify() {
    epoch_.fetch_add(1);  // seq_cst: pairs with the sleepers_ check below
    if (sleepers_.load() > 0) futexWakeAll(&epoch_, false);
  }
  /// Spins, yields, then blocks until the epoch differs from `seen` or `timeout` passes.
  bool wait(uint32_t seen, std::chrono::nanoseconds timeout);

 private:
  std::atomic<uint32_t> epoch_{0};
  std::atomic<uint32_t> sleepers_{0};
};

}  // namespace nlccl

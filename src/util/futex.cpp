#include "util/futex.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <ctime>

namespace nlccl {

bool futexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout,
               bool shared) {
  if (word->load(std::memory_order_acquire) != expected) return true;
  if (timeout.count() <= 0) return false;
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  int op = shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, expected, &ts, nullptr, 0);
  if (rc == -1 && errno == ETIMEDOUT) return false;
  return true;
}

void futexWakeAll(std::atomic<uint32_t>* word, bool shared) {
  int op = shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, INT_MAX, nullptr, nullptr, 0);
}

bool spinWhileEqual(const std::atomic<uint32_t>* word, uint32_t seen,
                    std::chrono::nanoseconds budget, uint32_t yieldEvery) {
  const auto end = std::chrono::steady_clock::now() + budget;
  for (uint32_t i = 1;; ++i) {
    if (word->load(std::memory_order_acquire) != seen) return true;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & (yieldEvery - 1)) == 0) {
      if (std::chrono::steady_clock::now() >= end) return false;
      sched_yield();  // a peer on this core needs it more than we do
    }
  }
}

CpuMask affinityMask() {
  CpuMask m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    m.bits[0] = 1;
    return m;
  }
  for (int c = 0; c < kCpuMaskWords * 64 && c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) m.bits[c / 64] |= uint64_t{1} << (c % 64);
  return m;
}

int cpusInUnion(const CpuMask* masks, int n) {
  int count = 0;
  for (int w = 0; w < kCpuMaskWords; ++w) {
    uint64_t u = 0;
    for (int i = 0; i < n; ++i) u |= masks[i].bits[w];
    count += __builtin_popcountll(u);
  }
  return std::max(1, count);
}

bool Notifier::wait(uint32_t seen, std::chrono::nanoseconds timeout) {
  if (spinWhileEqual(&epoch_, seen)) return true;
  sleepers_.fetch_add(1);  // seq_cst (Dekker with notify)
  bool ok = futexWait(&epoch_, seen, timeout, false);
  sleepers_.fetch_sub(1, std::memory_order_acq_rel);
  return ok || epoch_.load(std::memory_order_acquire) != seen;
}

}  // namespace nlccl

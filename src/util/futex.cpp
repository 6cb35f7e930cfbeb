#include "util/futex.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

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

bool Notifier::wait(uint32_t seen, std::chrono::nanoseconds timeout) {
  // Spin a little: on a loaded 2-core machine the peer usually needs the core more than we do.
  for (int i = 0; i < 64; ++i) {
    if (epoch_.load(std::memory_order_acquire) != seen) return true;
  }
  for (int i = 0; i < 4; ++i) {
    sched_yield();
    if (epoch_.load(std::memory_order_acquire) != seen) return true;
  }
  sleepers_.fetch_add(1);  // seq_cst (Dekker with notify)
  bool ok = futexWait(&epoch_, seen, timeout, false);
  sleepers_.fetch_sub(1, std::memory_order_acq_rel);
  return ok || epoch_.load(std::memory_order_acquire) != seen;
}

}  // namespace nlccl

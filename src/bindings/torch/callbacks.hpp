// Where Work objects complete: marking a future runs its then() callbacks in the marking thread,
// and a callback may issue another operation and wait for its future (torch's PowerSGD comm hook
// does). So completions run on a small pool that starts a thread whenever every thread it has is
// busy: the one completing the awaited future is never stuck behind the callback awaiting it.
// Threads idle for a while exit, down to one.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

namespace nlccl_torch {

class Callbacks {
 public:
  Callbacks() = default;
  /// Runs what is queued, then waits for every thread to exit. Not on a pool thread.
  ~Callbacks();
  Callbacks(const Callbacks&) = delete;
  Callbacks& operator=(const Callbacks&) = delete;

  void post(std::function<void()> task);
  /// True on one of the pool's threads (which must not destroy the pool).
  bool onPoolThread() const;

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;      // a task was posted, or stop
  std::condition_variable exitCv_;  // a thread exited
  std::deque<std::function<void()>> tasks_;
  std::set<std::thread::id> ids_;
  size_t threads_ = 0;
  size_t idle_ = 0;
  bool stop_ = false;
};

}  // namespace nlccl_torch

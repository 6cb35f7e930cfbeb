#include "core/stream.hpp"

#include <sched.h>

namespace nlccl::core {

template <typename F>
bool Stream::spinFor(F ready, std::chrono::microseconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() > end) return false;
      sched_yield();  // on a loaded machine the thread we wait for needs the core
    }
  }
}

Stream::Stream() : thread_([this] { loop(); }) {}

Stream::~Stream() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    idleCv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Stream::enqueue(std::function<Status()> work, std::vector<std::shared_ptr<const std::atomic<bool>>> owners) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(work), std::move(owners)});
    submitted_.fetch_add(1);
  }
  cv_.notify_one();
}

void Stream::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (queue_.empty() && !stop_) {
      lock.unlock();
      uint64_t seen = finished_.load();
      spinFor([&] { return submitted_.load() != seen; }, std::chrono::microseconds(50));
      lock.lock();
    }
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    Item item = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    Status s = item.work();
    lock.lock();
    --running_;
    finished_.fetch_add(1);
    if (s != Status::Success && currentError() == Status::Success) {
      error_ = s;
      errorReported_ = false;
      if (isFatal(s)) errorOwners_ = std::move(item.owners);
    }
    if (queue_.empty() && running_ == 0) idleCv_.notify_all();
  }
}

Status Stream::synchronize() {
  spinFor([this] { return finished_.load() == submitted_.load(); }, std::chrono::microseconds(50));
  std::unique_lock<std::mutex> lock(mu_);
  idleCv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
  Status s = currentError();
  errorReported_ = s != Status::Success;
  if (!isFatal(s)) error_ = Status::Success;  // fatal errors stay until their comms are gone
  return s;
}

Status Stream::query() {
  std::lock_guard<std::mutex> lock(mu_);
  if (Status s = currentError(); s != Status::Success) {
    errorReported_ = true;
    return s;
  }
  return (queue_.empty() && running_ == 0) ? Status::Success : Status::InProgress;
}

Status Stream::currentError() {
  if (isFatal(error_) && errorReported_) {
    bool anyAlive = false;
    for (const auto& o : errorOwners_) anyAlive = anyAlive || o->load();
    if (!anyAlive) {  // every communicator of the failed work was aborted or destroyed
      error_ = Status::Success;
      errorOwners_.clear();
    }
  }
  return error_;
}

}  // namespace nlccl::core

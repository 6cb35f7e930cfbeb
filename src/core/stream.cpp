#include "core/stream.hpp"

namespace nlccl::core {

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

void Stream::enqueue(std::function<Status()> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(work));
  }
  cv_.notify_one();
}

void Stream::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and drained
    auto work = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    Status s = work();
    lock.lock();
    --running_;
    if (s != Status::Success && error_ == Status::Success) error_ = s;
    if (queue_.empty() && running_ == 0) idleCv_.notify_all();
  }
}

Status Stream::synchronize() {
  std::unique_lock<std::mutex> lock(mu_);
  idleCv_.wait(lock, [this] { return queue_.empty() && running_ == 0; });
  Status s = error_;
  error_ = Status::Success;
  return s;
}

Status Stream::query() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_ != Status::Success) return error_;
  return (queue_.empty() && running_ == 0) ? Status::Success : Status::InProgress;
}

}  // namespace nlccl::core

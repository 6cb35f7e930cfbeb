#include "callbacks.hpp"

#include <chrono>

namespace nlccl_torch {

namespace {
constexpr size_t kMaxThreads = 64;  // nested waits deeper than this queue up
constexpr auto kIdleExit = std::chrono::seconds(2);
}  // namespace

Callbacks::~Callbacks() {
  std::unique_lock<std::mutex> lock(mu_);
  stop_ = true;
  cv_.notify_all();
  exitCv_.wait(lock, [this] { return threads_ == 0; });
}

void Callbacks::post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  tasks_.push_back(std::move(task));
  // Every queued task needs a thread of its own that is not busy (it may be what a busy one
  // waits for).
  if (tasks_.size() > idle_ && threads_ < kMaxThreads) {
    ++threads_;
    std::thread([this] { run(); }).detach();  // the destructor waits for it
  } else {
    cv_.notify_one();
  }
}

bool Callbacks::onPoolThread() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ids_.count(std::this_thread::get_id()) != 0;
}

void Callbacks::run() {
  std::unique_lock<std::mutex> lock(mu_);
  ids_.insert(std::this_thread::get_id());
  while (true) {
    ++idle_;
    bool woken = cv_.wait_for(lock, kIdleExit, [this] { return stop_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) {
      if (stop_ || (!woken && threads_ > 1)) break;
      continue;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // drops what it holds (a Work) before taking the lock
    lock.lock();
  }
  ids_.erase(std::this_thread::get_id());
  --threads_;
  exitCv_.notify_all();
}

}  // namespace nlccl_torch

// The bootstrap root's accept loop, made to survive running out of file descriptors. When accept()
// fails with EMFILE/ENFILE the pending connection stays queued and the listener stays readable, so
// retrying at once spins at 100% CPU. Instead the listener
//   - keeps one spare descriptor (libuv's and NCCL's trick): on EMFILE it closes it, accepts the
//     queued connections and closes them at once, then takes the spare back. The backlog empties,
//     so the kernel does not start dropping SYNs (whose retransmits delay a rank by seconds), and
//     a rank whose connection was dropped before the handshake simply connects again;
//   - waits 1, 2, 4 ... 100 ms before the next accept after any failure (reset on success).
#pragma once

// A standard header first: asio picks its handler allocator (aligned_alloc or operator new) from
// _GLIBCXX_HAVE_ALIGNED_ALLOC, which only exists once libstdc++'s config is included. With asio
// first, this file's handlers would be allocated with operator new and freed with free() by
// root.cpp's io_context (ASan: alloc-dealloc-mismatch).
#include <atomic>
#include <functional>

#include <asio.hpp>

#include "bootstrap/unique_id.hpp"
#include "util/status.hpp"

namespace nlccl::bootstrap {

class Listener {
 public:
  using OnAccept = std::function<void(asio::ip::tcp::socket)>;

  explicit Listener(asio::io_context& io);
  ~Listener();

  /// Binds and listens on `want` (port 0: ephemeral); *got is the bound address.
  Status listen(const Endpoint& want, Endpoint* got);
  /// Starts accepting on the io thread; `onAccept` gets every accepted connection.
  void start(OnAccept onAccept);
  /// Stops accepting and closes the listener (io thread).
  void close();

  /// accept() calls that failed, and connections dropped for want of a descriptor.
  int acceptFailures() const { return acceptFailures_.load(); }
  int dropped() const { return dropped_.load(); }

  static constexpr int kMaxBackoffMs = 100;

 private:
  void accept();
  void acceptFailed(const asio::error_code& ec);
  void dropQueued();

  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_;
  OnAccept onAccept_;
  int spareFd_ = -1;
  int backoffMs_ = 0;     // 0 while accept succeeds
  int failedInARow_ = 0;  // failures in the current episode
  int droppedInARow_ = 0;
  std::atomic<int> acceptFailures_{0};
  std::atomic<int> dropped_{0};
};

}  // namespace nlccl::bootstrap

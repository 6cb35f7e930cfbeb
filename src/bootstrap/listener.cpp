#include "bootstrap/listener.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "util/log.hpp"

namespace nlccl::bootstrap {

using asio::ip::tcp;

namespace {

int openSpare() { return ::open("/dev/null", O_RDONLY | O_CLOEXEC); }

bool outOfDescriptors(const asio::error_code& ec) {
  return ec.category() == asio::system_category() && (ec.value() == EMFILE || ec.value() == ENFILE);
}

/// At most this many queued connections are dropped per failed accept (then the back-off runs):
/// a full default backlog (somaxconn 4096) in one pass, ~10 us each.
constexpr int kMaxDropsPerFailure = 4096;

}  // namespace

Listener::Listener(asio::io_context& io) : acceptor_(io), retry_(io) {}

Listener::~Listener() {
  if (spareFd_ >= 0) ::close(spareFd_);
}

Status Listener::listen(const Endpoint& want, Endpoint* got) {
  asio::error_code ec;
  asio::ip::address addr;
  if (want.ipv6) {
    asio::ip::address_v6::bytes_type b;
    std::copy(want.addr.begin(), want.addr.end(), b.begin());
    addr = asio::ip::address_v6(b);
  } else {
    addr = asio::ip::address_v4({want.addr[0], want.addr[1], want.addr[2], want.addr[3]});
  }
  tcp::endpoint ep(addr, want.port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  // Non-blocking at the OS level, so that dropQueued's raw accept() returns once the queue is empty.
  if (!ec) acceptor_.non_blocking(true, ec);
  if (ec) {
    WARN("bootstrap: cannot listen on %s: %s", want.toString().c_str(), ec.message().c_str());
    return Status::SystemError;
  }
  spareFd_ = openSpare();
  *got = want;
  got->port = acceptor_.local_endpoint(ec).port();
  return Status::Success;
}

void Listener::start(OnAccept onAccept) {
  onAccept_ = std::move(onAccept);
  accept();
}

void Listener::close() {
  asio::error_code ignored;
  retry_.cancel();
  acceptor_.close(ignored);
}

void Listener::accept() {
  acceptor_.async_accept([this](const asio::error_code& ec, tcp::socket sock) {
    if (ec) {
      if (ec != asio::error::operation_aborted && acceptor_.is_open()) acceptFailed(ec);
      return;
    }
    if (failedInARow_ > 0) {
      INFO(log::kBootstrap,
           "bootstrap root: accepting again after %d failed accepts (%d connections dropped)",
           failedInARow_, droppedInARow_);
      backoffMs_ = failedInARow_ = droppedInARow_ = 0;
    }
    if (spareFd_ < 0) spareFd_ = openSpare();
    onAccept_(std::move(sock));
    accept();
  });
}

void Listener::acceptFailed(const asio::error_code& ec) {
  ++acceptFailures_;
  const bool noFds = outOfDescriptors(ec);
  if (failedInARow_++ == 0)
    WARN("bootstrap root: accept failed (%s)%s; retrying with back-off", ec.message().c_str(),
         noFds ? ": dropping new connections until descriptors free up (raise ulimit -n?)" : "");
  if (noFds) dropQueued();
  backoffMs_ = std::clamp(backoffMs_ * 2, 1, kMaxBackoffMs);
  retry_.expires_after(std::chrono::milliseconds(backoffMs_));
  retry_.async_wait([this](const asio::error_code& tec) {
    if (!tec && acceptor_.is_open()) accept();
  });
}

void Listener::dropQueued() {
  if (spareFd_ < 0) {  // lost the spare last time: take it back now, drop next time
    spareFd_ = openSpare();
    return;
  }
  ::close(spareFd_);
  spareFd_ = -1;
  for (int i = 0; i < kMaxDropsPerFailure; ++i) {
    int fd = ::accept4(acceptor_.native_handle(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) break;  // queue empty (EAGAIN), or another thread took the freed descriptor
    ::close(fd);
    ++dropped_;
    ++droppedInARow_;
  }
  spareFd_ = openSpare();
}

}  // namespace nlccl::bootstrap

// A hand-driven client of the bootstrap root for the tests that play a hostile or broken peer:
// raw bytes, a scripted handshake with any secret, and a view of what the root sent back.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "bootstrap/auth.hpp"
#include "bootstrap/wire.hpp"

namespace nlccl::bootstrap::test {

class RawPeer {
 public:
  /// Connects to 127.0.0.1:`port`, from the source address `from` if given (e.g. "127.0.0.2").
  explicit RawPeer(uint16_t port, const char* from = nullptr) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    if (from != nullptr) {
      sockaddr_in src{};
      src.sin_family = AF_INET;
      if (inet_pton(AF_INET, from, &src.sin_addr) != 1 ||
          bind(fd_, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0)
        return;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawPeer() {
    if (fd_ >= 0) close(fd_);
  }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  bool ok() const { return ok_; }
  void send(const std::vector<uint8_t>& b) { (void)!::send(fd_, b.data(), b.size(), MSG_NOSIGNAL); }
  void halfClose() { shutdown(fd_, SHUT_WR); }

  /// Reads until the root closes the connection (true) or `limitMs` passes (false).
  bool closedByRoot(int limitMs = 5000) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(limitMs);
    while (!eof_ && std::chrono::steady_clock::now() < end) {
      if (!fill(50)) eof_ = true;
    }
    return eof_;
  }

  /// Reads one whole frame within `limitMs`; false on EOF, timeout or a frame that does not parse.
  bool readFrame(wire::Message* m, int limitMs = 5000) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(limitMs);
    for (;;) {
      size_t used = 0;
      std::string why;
      auto rest = std::span<const uint8_t>(in_).subspan(consumed_);
      auto p = wire::parseFrame(rest, wire::kMaxMessageBytes, m, &used, &why);
      if (p == wire::Parse::Ok) {
        consumed_ += used;
        return true;
      }
      if (p == wire::Parse::Bad || eof_ || std::chrono::steady_clock::now() >= end) return false;
      if (!fill(50)) eof_ = true;
    }
  }

  /// Runs the handshake with `secret` and sends the hello for `rank` of `nranks`. False if the
  /// root did not answer with a challenge. `*rootOk` tells whether the root's proof verified.
  bool handshake(const Secret& secret, int32_t rank, int32_t nranks, bool* rootOk = nullptr,
                 std::span<const uint8_t> blob = {}) {
    wire::Nonce mine{};
    if (auth::randomBytes(mine) != Status::Success) return false;
    send(wire::encodeAuthStart(mine));
    wire::Message m;
    if (!readFrame(&m) || m.header.type != wire::Type::Challenge) return false;
    auto ch = std::get<wire::Challenge>(m.body);
    if (rootOk) *rootOk = auth::sameProof(ch.proof, auth::rootProof(secret, mine, ch.nonce));
    auto part = wire::helloSignedPart(rank, nranks, blob);
    send(wire::encodeHello(auth::rankProof(secret, mine, ch.nonce, part), part));
    return true;
  }

  /// The text of the first Error frame the root sent at or after the current position ("" if none).
  std::string errorText() {
    wire::Message m;
    while (readFrame(&m, 1000)) {
      if (auto* e = std::get_if<wire::ErrorMsg>(&m.body)) return std::string(e->text);
    }
    return "";
  }

  /// Every byte received so far.
  const std::vector<uint8_t>& received() const { return in_; }

 private:
  /// Waits up to `ms` for input and appends it; false once the connection is closed or reset.
  bool fill(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return true;
    uint8_t buf[4096];
    ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) return false;
    in_.insert(in_.end(), buf, buf + n);
    return true;
  }

  int fd_ = -1;
  bool ok_ = false;
  std::vector<uint8_t> in_;
  size_t consumed_ = 0;
  bool eof_ = false;
};

}  // namespace nlccl::bootstrap::test

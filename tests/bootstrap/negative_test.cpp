// Bad peers at the root: each is refused with a WARN line naming what was wrong, only its own
// connection is closed, and the real ranks still form their bootstrap.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "bootstrap/helpers.hpp"
#include "bootstrap/wire.hpp"

namespace nlccl::bootstrap {
namespace {

using namespace std::chrono_literals;

/// A raw client on 127.0.0.1: sends bytes (optionally half-closing), then reports whether the root
/// closed the connection within `limit`.
class RawPeer {
 public:
  explicit RawPeer(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~RawPeer() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return ok_; }
  void send(const std::vector<uint8_t>& b) { (void)!::send(fd_, b.data(), b.size(), MSG_NOSIGNAL); }
  void halfClose() { shutdown(fd_, SHUT_WR); }
  bool closedByRoot(int limitMs = 5000) {
    pollfd p{fd_, POLLIN, 0};
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(limitMs);
    while (std::chrono::steady_clock::now() < end) {
      if (poll(&p, 1, 50) > 0) {
        char buf[256];
        ssize_t n = recv(fd_, buf, sizeof(buf), 0);
        if (n <= 0) return true;  // EOF or reset: the root closed us
      }
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

std::vector<uint8_t> bytesOf(const std::string& s) { return {s.begin(), s.end()}; }

TEST(BootstrapNegative, BadPeersAreRefusedAndRealRanksComplete) {
  setenv("NLCCL_DEBUG", "WARN", 1);
  log::reset();
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  Endpoint ep;
  ASSERT_EQ(decodeUniqueId(id, &ep), Status::Success);
  const int n = 3;

  // Rank 0 joins first, so the root knows nranks = 3 before the impostors arrive.
  std::vector<test::RankOutcome> first, rest;
  auto body = [](Bootstrap& b) -> Status {
    uint32_t mine = 100 + b.rank(), all[3];
    NLCHECK(b.allGather(&mine, sizeof(mine), all));
    for (int r = 0; r < 3; ++r)
      if (all[r] != 100u + r) return Status::InternalError;
    return b.barrier();
  };
  std::thread t0([&] { first = test::runRanks(id, n, {0}, 20s, body); });
  ASSERT_TRUE(test::waitFor([&] {
    RootStats s;
    return rootStats(id, &s) && s.joined == 1;
  }));

  testing::internal::CaptureStderr();
  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    bool halfClose;
    const char* expect;  // substring of the refusal line
  };
  auto hdr = wire::encodeHello(ep.secret, 1, n, {});
  std::vector<uint8_t> truncHeader(hdr.begin(), hdr.begin() + 7);
  auto longHello = wire::encodeHello(ep.secret, 1, n, bytesOf(std::string(100, 'x')));
  std::vector<uint8_t> truncPayload(longHello.begin(), longHello.begin() + 40);
  auto oversized = wire::encodeHello(ep.secret, 1, n, {});
  oversized[19] = 0x40;  // payload length 1 GiB
  auto outOfRange = wire::encodeHello(ep.secret, 1, n, {});
  outOfRange[wire::kHeaderBytes + 8] = 7;  // rank 7 of 3
  std::vector<Case> cases = {
      {"bad secret", wire::encodeHello(ep.secret ^ 1, 1, n, {}), false, "bad secret"},
      {"garbage", bytesOf("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), false, "garbage"},
      {"truncated header", truncHeader, true, "truncated message"},
      {"truncated payload", truncPayload, true, "truncated message"},
      {"oversized length", oversized, false, "oversized message"},
      {"duplicate rank", wire::encodeHello(ep.secret, 0, n, {}), false, "duplicate rank 0"},
      {"out-of-range rank", outOfRange, false, "rank out of range"},
      {"wrong nranks", wire::encodeHello(ep.secret, 1, n + 1, {}), false, "nranks=4"},
      {"gather before hello", wire::encodeQuery(0, 0, 0), false, "before hello"},
  };
  size_t refused = 0;
  for (const auto& c : cases) {
    RawPeer p(ep.port);
    ASSERT_TRUE(p.ok()) << c.name;
    p.send(c.bytes);
    if (c.halfClose) p.halfClose();
    EXPECT_TRUE(p.closedByRoot()) << c.name << ": the root kept the connection open";
    ++refused;
    RootStats s;
    ASSERT_TRUE(test::waitFor([&] { return rootStats(id, &s) && s.refusals.size() >= refused; }))
        << c.name;
    EXPECT_NE(s.refusals.back().find(c.expect), std::string::npos)
        << c.name << ": " << s.refusals.back();
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("WARN"), std::string::npos);
  EXPECT_NE(err.find("bad secret"), std::string::npos) << err;
  EXPECT_NE(err.find("duplicate rank 0"), std::string::npos) << err;

  // The real ranks 1 and 2 still complete, together with rank 0.
  std::thread t12([&] { rest = test::runRanks(id, n, {1, 2}, 20s, body); });
  t0.join();
  t12.join();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].status, Status::Success) << first[0].error;
  for (auto& r : rest) EXPECT_EQ(r.status, Status::Success) << r.error;
  RootStats s;
  ASSERT_TRUE(rootStats(id, &s));
  EXPECT_EQ(s.joined, n);
  EXPECT_TRUE(test::rootFinished(id));
  unsetenv("NLCCL_DEBUG");
  log::reset();
}

TEST(BootstrapNegative, ConnectionWithoutHelloDoesNotBlockRanks) {
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  Endpoint ep;
  ASSERT_EQ(decodeUniqueId(id, &ep), Status::Success);
  RawPeer idle(ep.port);  // connects and says nothing, for the whole test
  ASSERT_TRUE(idle.ok());
  auto res = test::runRanks(id, 4, test::allRanks(4), 10s,
                            [](Bootstrap& b) { return b.barrier(); });
  for (auto& r : res) EXPECT_EQ(r.status, Status::Success) << r.error;
  // Once the ranks are gone the root exits and closes the idle connection too.
  EXPECT_TRUE(idle.closedByRoot());
  EXPECT_TRUE(test::rootFinished(id));
}

}  // namespace
}  // namespace nlccl::bootstrap

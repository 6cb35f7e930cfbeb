// The handshake against an eavesdropper and a wrong id: a relay on 127.0.0.1 records everything a
// real rank and the root exchange; the secret is not in it, and replaying the rank's bytes on a new
// connection is refused. A rank holding the wrong secret is refused, and refuses the root.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "bootstrap/auth.hpp"
#include "bootstrap/helpers.hpp"
#include "bootstrap/raw_peer.hpp"

namespace nlccl::bootstrap {
namespace {

using namespace std::chrono_literals;
using Bytes = std::vector<uint8_t>;

/// A TCP relay on 127.0.0.1 for one connection to 127.0.0.1:`target`, recording both directions.
class Relay {
 public:
  explicit Relay(uint16_t target) : target_(target) {
    lfd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(lfd_, 1) != 0 ||
        getsockname(lfd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~Relay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    close(lfd_);
  }
  uint16_t port() const { return port_; }
  Bytes up() {  // rank -> root
    std::lock_guard<std::mutex> lock(mu_);
    return up_;
  }
  Bytes down() {  // root -> rank
    std::lock_guard<std::mutex> lock(mu_);
    return down_;
  }

 private:
  void run() {
    pollfd lp{lfd_, POLLIN, 0};
    while (!stop_ && poll(&lp, 1, 20) == 0) {
    }
    if (stop_) return;
    int a = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
    int b = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in t{};
    t.sin_family = AF_INET;
    t.sin_port = htons(target_);
    t.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (a < 0 || connect(b, reinterpret_cast<sockaddr*>(&t), sizeof(t)) != 0) {
      if (a >= 0) close(a);
      close(b);
      return;
    }
    pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    while (!stop_) {
      if (poll(p, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        uint8_t buf[4096];
        ssize_t n = recv(p[i].fd, buf, sizeof(buf), 0);
        if (n <= 0) {
          close(a);
          close(b);
          return;
        }
        {
          std::lock_guard<std::mutex> lock(mu_);
          Bytes& rec = i == 0 ? up_ : down_;
          rec.insert(rec.end(), buf, buf + n);
        }
        (void)!send(p[1 - i].fd, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
    }
    close(a);
    close(b);
  }

  uint16_t target_;
  uint16_t port_ = 0;
  int lfd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  Bytes up_, down_;
};

bool contains(const Bytes& hay, std::span<const uint8_t> needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

/// The same id pointing at another port (the relay's).
UniqueId viaPort(const UniqueId& id, uint16_t port) {
  Endpoint ep;
  EXPECT_EQ(decodeUniqueId(id, &ep), Status::Success);
  ep.port = port;
  UniqueId out;
  encodeUniqueId(ep, &out);
  return out;
}

TEST(BootstrapAuth, RecordedHelloReplayedOnAnotherConnectionIsRefused) {
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  Endpoint ep;
  ASSERT_EQ(decodeUniqueId(id, &ep), Status::Success);
  const int n = 2;
  auto body = [](Bootstrap& b) -> Status { return b.barrier(); };

  // Rank 0 joins through the recording relay, then waits in its join for rank 1.
  Relay relay(ep.port);
  ASSERT_NE(relay.port(), 0);
  std::vector<test::RankOutcome> r0, r1;
  std::thread t0([&] { r0 = test::runRanks(viaPort(id, relay.port()), n, {0}, 20s, body); });
  ASSERT_TRUE(test::waitFor([&] {
    RootStats s;
    return rootStats(id, &s) && s.joined == 1;
  }));
  Bytes up = relay.up(), down = relay.down();
  ASSERT_FALSE(up.empty());
  ASSERT_FALSE(down.empty());
  // The secret never crossed the wire, in either direction.
  EXPECT_FALSE(contains(up, ep.secret)) << "the rank sent the secret";
  EXPECT_FALSE(contains(down, ep.secret)) << "the root sent the secret";

  // The eavesdropper replays the rank's bytes verbatim (auth-start and hello) on a new connection.
  // The rank number in it is taken, so first check that refusal is for the proof, not the rank.
  test::RawPeer replay(ep.port);
  ASSERT_TRUE(replay.ok());
  replay.send(up);
  std::string told = replay.errorText();
  EXPECT_TRUE(replay.closedByRoot());
  RootStats s;
  ASSERT_TRUE(test::waitFor([&] { return rootStats(id, &s) && !s.refusals.empty(); }));
  EXPECT_NE(s.refusals.back().find("authentication failed"), std::string::npos)
      << s.refusals.back();
  EXPECT_NE(told.find("authentication failed"), std::string::npos) << told;
  EXPECT_EQ(s.joined, 1);

  // A hello recorded for a rank that has not joined yet is no better: the replayer re-sends the
  // recorded auth-start, gets a fresh challenge, and answers it with the recorded hello.
  wire::Message m;
  size_t used = 0;
  std::string why;
  ASSERT_EQ(wire::parseFrame(up, wire::kMaxMessageBytes, &m, &used, &why), wire::Parse::Ok) << why;
  Bytes authStart(up.begin(), up.begin() + used);
  Bytes hello(up.begin() + used, up.end());
  ASSERT_EQ(wire::parseFrame(hello, wire::kMaxMessageBytes, &m, &used, &why), wire::Parse::Ok);
  ASSERT_EQ(m.header.type, wire::Type::Hello);
  test::RawPeer adaptive(ep.port);
  ASSERT_TRUE(adaptive.ok());
  adaptive.send(authStart);
  ASSERT_TRUE(adaptive.readFrame(&m));
  ASSERT_EQ(m.header.type, wire::Type::Challenge);
  adaptive.send(hello);
  EXPECT_NE(adaptive.errorText().find("authentication failed"), std::string::npos);
  EXPECT_TRUE(adaptive.closedByRoot());

  // Rank 1 joins for real, and rank 0 (through the relay) completes with it.
  r1 = test::runRanks(id, n, {1}, 20s, body);
  t0.join();
  ASSERT_EQ(r0.size(), 1u);
  EXPECT_EQ(r0[0].status, Status::Success) << r0[0].error;
  EXPECT_EQ(r1[0].status, Status::Success) << r1[0].error;
  ASSERT_TRUE(rootStats(id, &s));
  EXPECT_EQ(s.joined, n);
  printf("[ info ] replayed hello refused: %s\n", s.refusals.empty() ? "-" : s.refusals[0].c_str());
}

TEST(BootstrapAuth, RankWithTheWrongSecretIsRefusedBothWays) {
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  Endpoint ep;
  ASSERT_EQ(decodeUniqueId(id, &ep), Status::Success);
  Endpoint forged = ep;
  forged.secret[7] ^= 0x10;
  UniqueId wrong;
  encodeUniqueId(forged, &wrong);

  // A real rank with the wrong id finds that the root cannot prove the id's secret, and stops.
  auto bad = test::runRanks(wrong, 1, {0}, 10s, nullptr);
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].status, Status::RemoteError);
  EXPECT_NE(bad[0].error.find("did not prove"), std::string::npos) << bad[0].error;

  // A peer that answers the challenge with the wrong secret anyway is refused by the root.
  test::RawPeer p(ep.port);
  ASSERT_TRUE(p.ok());
  bool rootOk = true;
  ASSERT_TRUE(p.handshake(forged.secret, 0, 1, &rootOk));
  EXPECT_FALSE(rootOk);
  EXPECT_NE(p.errorText().find("authentication failed"), std::string::npos);
  EXPECT_TRUE(p.closedByRoot());
  RootStats s;
  ASSERT_TRUE(rootStats(id, &s));
  EXPECT_EQ(s.joined, 0);

  // The right id still joins.
  auto good = test::runRanks(id, 1, {0}, 10s, nullptr);
  EXPECT_EQ(good[0].status, Status::Success) << good[0].error;
  EXPECT_TRUE(test::rootFinished(id));
}

TEST(BootstrapAuth, RootRefusalReachesTheRankWithItsReason) {
  UniqueId id;
  ASSERT_EQ(createUniqueId(&id), Status::Success);
  // Rank 0 of 2 joins; a second rank 0 is refused, and learns why instead of a lost connection.
  std::vector<test::RankOutcome> first;
  std::thread t0([&] { first = test::runRanks(id, 2, {0}, 10s, nullptr); });
  ASSERT_TRUE(test::waitFor([&] {
    RootStats s;
    return rootStats(id, &s) && s.joined == 1;
  }));
  auto dup = test::runRanks(id, 2, {0}, 10s, nullptr);
  EXPECT_EQ(dup[0].status, Status::InvalidUsage);
  EXPECT_NE(dup[0].error.find("duplicate rank 0"), std::string::npos) << dup[0].error;
  auto one = test::runRanks(id, 2, {1}, 10s, nullptr);
  t0.join();
  EXPECT_EQ(first[0].status, Status::Success) << first[0].error;
  EXPECT_EQ(one[0].status, Status::Success) << one[0].error;
}

// A process that forks while another of its threads is inside the handshake's cryptography (the
// root's thread answering a rank, a rank's io thread): the child's own handshake must not block on
// a lock of OpenSSL's that the fork copied held. Without auth.cpp's fork guard, about 4 in 100
// such children hung here.
TEST(BootstrapAuth, ForkDuringHandshakeCryptographyLeavesTheChildWorking) {
  Secret secret{};
  secret.fill(7);
  wire::Nonce a{}, b{};
  std::atomic<bool> stop{false};
  std::thread busy([&] {  // as the root's thread is while ranks join
    while (!stop.load()) {
      (void)auth::rootProof(secret, a, b);
      wire::Nonce n{};
      (void)auth::randomBytes(n);
    }
  });
  const wire::Proof want = auth::rankProof(secret, a, b, {});
  int hung = 0, wrong = 0;
  for (int i = 0; i < 200; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {  // a rank's first handshake
      wire::Nonce n{};
      const bool ok = auth::randomBytes(n) == Status::Success &&
                      auth::sameProof(auth::rankProof(secret, a, b, {}), want);
      _exit(ok ? 0 : 1);
    }
    ASSERT_GT(pid, 0);
    int status = 0;
    const bool exited = test::waitFor([&] { return waitpid(pid, &status, WNOHANG) == pid; }, 5s);
    if (!exited) {
      ++hung;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++wrong;
    }
  }
  stop = true;
  busy.join();
  EXPECT_EQ(hung, 0) << "children blocked in the handshake's cryptography";
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace nlccl::bootstrap

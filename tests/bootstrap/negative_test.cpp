// Bad peers at the root: each is refused with a WARN line naming what was wrong, only its own
// connection is closed, and the real ranks still form their bootstrap.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <thread>

#include "bootstrap/helpers.hpp"
#include "bootstrap/raw_peer.hpp"
#include "bootstrap/wire.hpp"

namespace nlccl::bootstrap {
namespace {

using namespace std::chrono_literals;

using test::RawPeer;

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
  // Each case drives one connection; `expect` is a substring of the root's refusal line, which the
  // peer also receives as an Error frame (it is not authenticated yet).
  struct Case {
    const char* name;
    std::function<void(RawPeer&)> act;
    const char* expect;
  };
  Secret wrong = ep.secret;
  wrong[0] ^= 1;
  wire::Nonce nonce{};
  nonce[0] = 7;
  auto start = wire::encodeAuthStart(nonce);
  auto sendBytes = [](std::vector<uint8_t> b, bool halfClose = false) {
    return [b, halfClose](RawPeer& p) {
      p.send(b);
      if (halfClose) p.halfClose();
    };
  };
  std::vector<uint8_t> truncHeader(start.begin(), start.begin() + 7);
  std::vector<uint8_t> truncPayload(start.begin(), start.begin() + 40);
  auto oversized = start;
  oversized[19] = 0x40;  // payload length 1 GiB
  auto zeroProofHello = wire::encodeHello(wire::Proof{}, wire::helloSignedPart(1, n, {}));
  std::vector<Case> cases = {
      {"wrong secret", [&](RawPeer& p) { p.handshake(wrong, 1, n); }, "authentication failed"},
      {"garbage", sendBytes(bytesOf("GET / HTTP/1.1\r\nHost: x\r\n\r\n")), "garbage"},
      {"truncated header", sendBytes(truncHeader, true), "truncated message"},
      {"truncated payload", sendBytes(truncPayload, true), "truncated message"},
      {"oversized length", sendBytes(oversized), "oversized message"},
      {"duplicate rank", [&](RawPeer& p) { p.handshake(ep.secret, 0, n); }, "duplicate rank 0"},
      {"out-of-range rank", [&](RawPeer& p) { p.handshake(ep.secret, 7, n); }, "rank out of range"},
      {"wrong nranks", [&](RawPeer& p) { p.handshake(ep.secret, 1, n + 1); }, "nranks=4"},
      {"query before handshake", sendBytes(wire::encodeQuery(0, 0, 0)), "before the handshake"},
      {"hello before handshake", sendBytes(zeroProofHello), "before the handshake"},
      {"second auth-start", sendBytes([&] {
         auto two = start;
         two.insert(two.end(), start.begin(), start.end());
         return two;
       }()),
       "where the hello belongs"},
      {"challenge sent to the root", sendBytes(wire::encodeChallenge(nonce, wire::Proof{})),
       "before the handshake"},
  };
  size_t refused = 0;
  for (const auto& c : cases) {
    RawPeer p(ep.port);
    ASSERT_TRUE(p.ok()) << c.name;
    c.act(p);
    std::string told = p.errorText();
    EXPECT_TRUE(p.closedByRoot()) << c.name << ": the root kept the connection open";
    ++refused;
    RootStats s;
    ASSERT_TRUE(test::waitFor([&] { return rootStats(id, &s) && s.refusals.size() >= refused; }))
        << c.name;
    EXPECT_NE(s.refusals.back().find(c.expect), std::string::npos)
        << c.name << ": " << s.refusals.back();
    EXPECT_NE(told.find(c.expect), std::string::npos) << c.name << ": the peer was told \"" << told
                                                      << "\"";
  }
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("WARN"), std::string::npos);
  EXPECT_NE(err.find("authentication failed"), std::string::npos) << err;
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

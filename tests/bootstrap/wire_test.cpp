// The bootstrap wire format and unique id: round trips, refusals, and the fuzz function run over
// random and mutated inputs (the g++ stand-in for the libFuzzer target).
#include <gtest/gtest.h>

#include <random>
#include <variant>

#include "bootstrap/unique_id.hpp"
#include "bootstrap/wire.hpp"

extern "C" int nlcclFuzzBootstrapParser(const uint8_t* data, size_t size);

namespace nlccl::bootstrap {
namespace {

std::vector<uint8_t> bytesOf(const std::string& s) { return {s.begin(), s.end()}; }

wire::Parse parseAll(const std::vector<uint8_t>& f, wire::Message* m, std::string* why,
                     size_t limit = wire::kMaxMessageBytes) {
  size_t used = 0;
  auto p = wire::parseFrame(f, limit, m, &used, why);
  if (p == wire::Parse::Ok) {
    EXPECT_EQ(used, f.size());
  }
  return p;
}

TEST(BootstrapWire, HelloRoundTrip) {
  auto blob = bytesOf("host:boot");
  auto f = wire::encodeHello(0x1234567890abcdefull, 2, 5, blob);
  wire::Message m;
  std::string why;
  ASSERT_EQ(parseAll(f, &m, &why), wire::Parse::Ok) << why;
  auto& h = std::get<wire::Hello>(m.body);
  EXPECT_EQ(h.secret, 0x1234567890abcdefull);
  EXPECT_EQ(h.rank, 2);
  EXPECT_EQ(h.nranks, 5);
  EXPECT_EQ(std::string(h.blob.begin(), h.blob.end()), "host:boot");
}

TEST(BootstrapWire, ResultAndQueryReplyRoundTrip) {
  auto f = wire::encodeResult(7, 9, {bytesOf("a"), {}, bytesOf("ccc")});
  wire::Message m;
  std::string why;
  ASSERT_EQ(parseAll(f, &m, &why), wire::Parse::Ok) << why;
  EXPECT_EQ(m.header.group, 7u);
  EXPECT_EQ(m.header.seq, 9u);
  auto& r = std::get<wire::Result>(m.body);
  ASSERT_EQ(r.pieces.size(), 3u);
  EXPECT_EQ(r.pieces[1].size(), 0u);
  EXPECT_EQ(std::string(r.pieces[2].begin(), r.pieces[2].end()), "ccc");

  auto q = wire::encodeQueryReply(0, 0, 4, {2, 3});
  ASSERT_EQ(parseAll(q, &m, &why), wire::Parse::Ok) << why;
  EXPECT_EQ(std::get<wire::QueryReply>(m.body).missing, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(wire::formatRankList({2, 3}), "2,3");
}

TEST(BootstrapWire, RefusesBadFrames) {
  wire::Message m;
  std::string why;
  auto f = wire::encodeHello(1, 0, 2, {});
  // Truncated: every proper prefix needs more bytes.
  for (size_t n = 0; n < f.size(); ++n) {
    std::vector<uint8_t> pre(f.begin(), f.begin() + n);
    size_t used;
    EXPECT_EQ(wire::parseFrame(pre, wire::kMaxMessageBytes, &m, &used, &why), wire::Parse::NeedMore);
  }
  auto bad = f;
  bad[0] ^= 0xff;
  EXPECT_EQ(parseAll(bad, &m, &why), wire::Parse::Bad);
  EXPECT_NE(why.find("magic"), std::string::npos);
  bad = f;
  bad[19] = 0x40;  // length 1 GiB
  EXPECT_EQ(parseAll(bad, &m, &why, wire::kMaxHelloBytes), wire::Parse::Bad);
  EXPECT_NE(why.find("oversized"), std::string::npos);
  EXPECT_EQ(parseAll(wire::encodeHello(1, 3, 2, {}), &m, &why), wire::Parse::Bad);
  EXPECT_NE(why.find("rank out of range"), std::string::npos);
  EXPECT_EQ(parseAll(wire::encodeHello(1, 0, 0, {}), &m, &why), wire::Parse::Bad);
  // A result whose size table claims more than the payload holds.
  auto r = wire::encodeResult(0, 1, {bytesOf("abcd")});
  r[wire::kHeaderBytes + 4] = 0xff;
  EXPECT_EQ(parseAll(r, &m, &why), wire::Parse::Bad);
  // A gather whose data does not match its declared size.
  wire::Gather g;
  g.rank = 0;
  g.nranks = 1;
  g.bytes = 8;
  auto data = bytesOf("1234");
  g.data = data;
  EXPECT_EQ(parseAll(wire::encodeGather(0, 1, g), &m, &why), wire::Parse::Bad);
}

TEST(BootstrapWire, FuzzDriverOverRandomAndMutatedInputs) {
  std::mt19937_64 rng(12345);
  std::vector<std::vector<uint8_t>> seeds = {
      wire::encodeHello(42, 1, 4, bytesOf("h")),
      wire::encodeResult(3, 4, {bytesOf("xy"), bytesOf("zw")}),
      wire::encodeQueryReply(0, 2, 8, {1, 5, 7}),
      wire::encodePeerDown(3, "rank 3 disconnected"),
      wire::encodeError(0, 1, "size mismatch"),
      wire::encodeGoodbye(),
      wire::encodeQuery(0, 1, 0),
  };
  int accepted = 0;
  for (auto& s : seeds) accepted += nlcclFuzzBootstrapParser(s.data(), s.size());
  EXPECT_EQ(accepted, 2 * static_cast<int>(seeds.size()));  // every seed parses under both limits
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> in;
    if (iter % 2 == 0) {  // pure garbage
      in.resize(rng() % 96);
      for (auto& b : in) b = static_cast<uint8_t>(rng());
    } else {  // a valid frame (or two) with a few bits flipped, maybe cut short
      in = seeds[rng() % seeds.size()];
      if (rng() % 3 == 0) {
        auto& more = seeds[rng() % seeds.size()];
        in.insert(in.end(), more.begin(), more.end());
      }
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < flips && !in.empty(); ++k)
        in[rng() % in.size()] ^= uint8_t(1u << (rng() % 8));
      if (rng() % 4 == 0) in.resize(rng() % (in.size() + 1));
    }
    nlcclFuzzBootstrapParser(in.data(), in.size());
  }
}

TEST(BootstrapUniqueId, RoundTripAndCorruption) {
  Endpoint ep;
  ep.addr = {127, 0, 0, 1};
  ep.port = 4242;
  ep.secret = randomSecret();
  UniqueId id;
  encodeUniqueId(ep, &id);
  Endpoint back;
  ASSERT_EQ(decodeUniqueId(id, &back), Status::Success);
  EXPECT_EQ(back.port, 4242);
  EXPECT_EQ(back.secret, ep.secret);
  EXPECT_EQ(back.toString(), "127.0.0.1:4242");
  UniqueId bad = id;
  bad.bytes[0] ^= 1;
  EXPECT_EQ(decodeUniqueId(bad, &back), Status::InvalidArgument);
  bad = id;
  bad.bytes[100] = 1;
  EXPECT_EQ(decodeUniqueId(bad, &back), Status::InvalidArgument);
  UniqueId zero;
  EXPECT_EQ(decodeUniqueId(zero, &back), Status::InvalidArgument);
}

TEST(BootstrapUniqueId, ListenAddressFromEnvironment) {
  Endpoint ep;
  setenv("NLCCL_BOOTSTRAP_ADDR", "127.0.0.1:5555", 1);
  ASSERT_EQ(listenEndpointFromEnv(&ep), Status::Success);
  EXPECT_EQ(ep.toString(), "127.0.0.1:5555");
  setenv("NLCCL_BOOTSTRAP_ADDR", "[::1]:6000", 1);
  ASSERT_EQ(listenEndpointFromEnv(&ep), Status::Success);
  EXPECT_EQ(ep.toString(), "[::1]:6000");
  setenv("NLCCL_BOOTSTRAP_ADDR", "127.0.0.1:99999", 1);
  EXPECT_EQ(listenEndpointFromEnv(&ep), Status::InvalidArgument);
  unsetenv("NLCCL_BOOTSTRAP_ADDR");
  setenv("NLCCL_SOCKET_IFNAME", "lo", 1);
  ASSERT_EQ(listenEndpointFromEnv(&ep), Status::Success);
  EXPECT_EQ(ep.toString(), "127.0.0.1:0");
  setenv("NLCCL_SOCKET_IFNAME", "no-such-if0", 1);
  EXPECT_EQ(listenEndpointFromEnv(&ep), Status::InvalidArgument);
  unsetenv("NLCCL_SOCKET_IFNAME");
  ASSERT_EQ(listenEndpointFromEnv(&ep), Status::Success);
  EXPECT_EQ(ep.toString(), "127.0.0.1:0");
  EXPECT_NE(hostIdentity().find(':'), std::string::npos);
}

}  // namespace
}  // namespace nlccl::bootstrap

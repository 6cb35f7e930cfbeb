// The bootstrap wire format and unique id: round trips, refusals, and the fuzz function run over
// random and mutated inputs (the g++ stand-in for the libFuzzer target).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <variant>

#include "bootstrap/auth.hpp"
#include "bootstrap/fuzz_seeds.hpp"
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

TEST(BootstrapWire, HandshakeRoundTrip) {
  wire::Nonce nonce{};
  wire::Proof proof{};
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = uint8_t(i + 1);
  for (size_t i = 0; i < proof.size(); ++i) proof[i] = uint8_t(200 - i);
  auto blob = bytesOf("host:boot");
  auto part = wire::helloSignedPart(2, 5, blob);
  auto f = wire::encodeHello(proof, part);
  wire::Message m;
  std::string why;
  ASSERT_EQ(parseAll(f, &m, &why), wire::Parse::Ok) << why;
  auto& h = std::get<wire::Hello>(m.body);
  EXPECT_EQ(h.proof, proof);
  EXPECT_EQ(h.rank, 2);
  EXPECT_EQ(h.nranks, 5);
  EXPECT_EQ(std::string(h.blob.begin(), h.blob.end()), "host:boot");
  EXPECT_TRUE(std::equal(h.signedPart.begin(), h.signedPart.end(), part.begin(), part.end()));

  ASSERT_EQ(parseAll(wire::encodeAuthStart(nonce), &m, &why), wire::Parse::Ok) << why;
  EXPECT_EQ(std::get<wire::AuthStart>(m.body).nonce, nonce);
  ASSERT_EQ(parseAll(wire::encodeChallenge(nonce, proof), &m, &why), wire::Parse::Ok) << why;
  EXPECT_EQ(std::get<wire::Challenge>(m.body).nonce, nonce);
  EXPECT_EQ(std::get<wire::Challenge>(m.body).proof, proof);

  // Every size other than the exact one is refused, and so is a handshake frame outside round 0.
  for (auto frame : {wire::encodeAuthStart(nonce), wire::encodeChallenge(nonce, proof)}) {
    for (int delta : {-1, 1}) {
      auto bad = frame;
      if (delta < 0) bad.pop_back(); else bad.push_back(0);
      uint32_t len = static_cast<uint32_t>(bad.size() - wire::kHeaderBytes);
      for (int i = 0; i < 4; ++i) bad[16 + i] = uint8_t(len >> (8 * i));
      EXPECT_EQ(parseAll(bad, &m, &why), wire::Parse::Bad);
      EXPECT_NE(why.find("size"), std::string::npos) << why;
    }
    auto late = frame;
    late[12] = 1;  // seq 1
    EXPECT_EQ(parseAll(late, &m, &why), wire::Parse::Bad);
    EXPECT_NE(why.find("outside round 0"), std::string::npos) << why;
  }
  auto shortHello = wire::encodeHello(proof, {});  // a proof but no rank or nranks
  EXPECT_EQ(parseAll(shortHello, &m, &why), wire::Parse::Bad);
  EXPECT_NE(why.find("truncated hello"), std::string::npos) << why;
}

TEST(BootstrapAuth, ProofsBindSecretNoncesAndClaims) {
  Secret k{}, k2{};
  ASSERT_EQ(auth::randomBytes(k), Status::Success);
  k2 = k;
  k2[15] ^= 0x80;
  wire::Nonce a{}, b{};
  ASSERT_EQ(auth::randomBytes(a), Status::Success);
  ASSERT_EQ(auth::randomBytes(b), Status::Success);
  ASSERT_NE(a, b);
  auto part = wire::helloSignedPart(1, 2, bytesOf("h"));
  auto rank = auth::rankProof(k, a, b, part);
  EXPECT_TRUE(auth::sameProof(rank, auth::rankProof(k, a, b, part)));
  EXPECT_FALSE(auth::sameProof(rank, auth::rankProof(k2, a, b, part)));      // other secret
  EXPECT_FALSE(auth::sameProof(rank, auth::rankProof(k, a, a, part)));       // other root nonce
  EXPECT_FALSE(auth::sameProof(rank, auth::rankProof(k, b, b, part)));       // other rank nonce
  EXPECT_FALSE(auth::sameProof(rank, auth::rankProof(k, a, b, wire::helloSignedPart(0, 2, bytesOf("h")))));
  // The root's proof over the same nonces is not a rank's proof (no reflection).
  EXPECT_FALSE(auth::sameProof(auth::rootProof(k, a, b), auth::rankProof(k, a, b, {})));
  // Known answers (Python's hmac module) pin the construction docs/security.md describes:
  // HMAC-SHA256(secret, label | rank nonce | root nonce [| rank, nranks, blob]).
  Secret key{};
  wire::Nonce n1{}, n2{};
  for (int i = 0; i < 16; ++i) key[i] = uint8_t(i);
  for (int i = 0; i < 32; ++i) n1[i] = uint8_t(i), n2[i] = uint8_t(32 + i);
  auto hex = [](const wire::Proof& p) {
    std::string s;
    char b[3];
    for (uint8_t x : p) snprintf(b, sizeof(b), "%02x", x), s += b;
    return s;
  };
  EXPECT_EQ(hex(auth::rootProof(key, n1, n2)),
            "a7ad3f88bc60b18b3bcee2c2ebcf2ce6b2c4ae008cf1350d9fc66cb9205deb35");
  EXPECT_EQ(hex(auth::rankProof(key, n1, n2, part)),
            "1fab075ced4033be9834ac7a4efa93f6eaf402eb523ad1f710f3b0bab3ed271b");
  wire::Proof zero{};
  EXPECT_FALSE(auth::sameProof(rank, zero));
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
  auto f = wire::encodeHello(wire::Proof{}, wire::helloSignedPart(0, 2, {}));
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
  EXPECT_EQ(parseAll(wire::encodeHello({}, wire::helloSignedPart(3, 2, {})), &m, &why),
            wire::Parse::Bad);
  EXPECT_NE(why.find("rank out of range"), std::string::npos);
  EXPECT_EQ(parseAll(wire::encodeHello({}, wire::helloSignedPart(0, 0, {})), &m, &why),
            wire::Parse::Bad);
  // An unknown type just past the last one.
  auto unknown = wire::encodeGoodbye();
  unknown[4] = static_cast<uint8_t>(static_cast<int>(wire::Type::Challenge) + 1);
  EXPECT_EQ(parseAll(unknown, &m, &why), wire::Parse::Bad);
  EXPECT_NE(why.find("unknown message type"), std::string::npos);
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
  const auto seeds = test::fuzzSeeds();
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
  ASSERT_EQ(auth::randomBytes(ep.secret), Status::Success);
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
  bad = id;
  bad.bytes[44] = 1;  // first byte after the secret
  EXPECT_EQ(decodeUniqueId(bad, &back), Status::InvalidArgument);
  bad = id;
  bad.bytes[10] = 1;  // padding after the port
  EXPECT_EQ(decodeUniqueId(bad, &back), Status::InvalidArgument);
  bad = id;
  memset(bad.bytes + 28, 0, 16);  // no secret
  EXPECT_EQ(decodeUniqueId(bad, &back), Status::InvalidArgument);
  bad = id;
  bad.bytes[4] = 1;  // version 1: the 64-bit secret sent in clear
  EXPECT_EQ(decodeUniqueId(bad, &back), Status::InvalidArgument);
  // The secret is all 16 bytes at offset 28.
  EXPECT_EQ(memcmp(id.bytes + 28, ep.secret.data(), 16), 0);
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

// One valid frame of every bootstrap message type: the seeds of the libFuzzer corpus and of the
// random-input driver in wire_test (kept in one place so a new message type gets fuzzed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bootstrap/wire.hpp"

namespace nlccl::bootstrap::test {

inline std::vector<std::vector<uint8_t>> fuzzSeeds() {
  auto bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  wire::Nonce nonce{};
  wire::Proof proof{};
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t i = 0; i < proof.size(); ++i) proof[i] = static_cast<uint8_t>(255 - i);
  wire::Gather g;
  g.rank = 1;
  g.nranks = 2;
  g.bytes = 3;
  auto data = bytes("abc");
  g.data = data;
  wire::Gather bc = g;
  bc.op = wire::Op::Broadcast;
  bc.root = 1;
  return {
      wire::encodeAuthStart(nonce),
      wire::encodeChallenge(nonce, proof),
      wire::encodeHello(proof, wire::helloSignedPart(1, 4, bytes("host:boot"))),
      wire::encodeGather(0, 1, g),
      wire::encodeGather(5, 2, bc),
      wire::encodeResult(3, 4, {bytes("xy"), bytes("zw")}),
      wire::encodeQuery(0, 1, 0),
      wire::encodeQueryReply(0, 2, 8, {1, 5, 7}),
      wire::encodePeerDown(3, "rank 3 disconnected"),
      wire::encodeError(0, 1, "size mismatch"),
      wire::encodeGoodbye(),
  };
}

}  // namespace nlccl::bootstrap::test

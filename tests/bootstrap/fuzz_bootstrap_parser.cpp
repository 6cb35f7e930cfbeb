// Fuzz target for the bootstrap message parser: arbitrary bytes are fed as a stream of frames under
// both size limits (before and after authentication). The parser must never crash, read out of
// bounds or accept a frame whose parts do not add up. Built as a libFuzzer binary with clang
// (NLCCL_LIBFUZZER); bootstrap_test also drives nlcclFuzzBootstrapParser over random inputs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <variant>

#include "bootstrap/wire.hpp"

namespace wire = nlccl::bootstrap::wire;

/// Parses `data` as a stream of frames; returns how many frames were accepted.
extern "C" int nlcclFuzzBootstrapParser(const uint8_t* data, size_t size) {
  int accepted = 0;
  for (size_t limit : {wire::kMaxHelloBytes, wire::kMaxMessageBytes}) {
    std::span<const uint8_t> in(data, size);
    while (!in.empty()) {
      wire::Message m;
      size_t used = 0;
      std::string why;
      wire::Parse p = wire::parseFrame(in, limit, &m, &used, &why);
      if (p != wire::Parse::Ok) {
        if (p == wire::Parse::Bad && why.empty()) abort();  // every refusal has a reason
        break;
      }
      if (used < wire::kHeaderBytes || used > in.size()) abort();
      if (m.header.length > limit) abort();
      // Whatever was accepted must be self-consistent.
      if (auto* r = std::get_if<wire::Result>(&m.body)) {
        size_t total = 0;
        for (auto piece : r->pieces) total += piece.size();
        if (total > m.header.length) abort();
      }
      if (auto* h = std::get_if<wire::Hello>(&m.body)) {
        if (h->rank < 0 || h->rank >= h->nranks) abort();
      }
      ++accepted;
      in = in.subspan(used);
    }
  }
  return accepted;
}

#ifdef NLCCL_LIBFUZZER
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlcclFuzzBootstrapParser(data, size);
  return 0;
}
#endif

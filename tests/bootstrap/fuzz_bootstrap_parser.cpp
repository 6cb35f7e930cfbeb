// Fuzz target for the bootstrap message parser: arbitrary bytes are fed as a stream of frames under
// both size limits (before and after authentication). The parser must never crash, read out of
// bounds or accept a frame whose parts do not add up. Built as a libFuzzer binary with clang
// (NLCCL_LIBFUZZER, run by ctest for a few seconds); bootstrap_test also drives
// nlcclFuzzBootstrapParser over random and mutated inputs (the deterministic driver under g++).
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
      const auto payload = in.subspan(wire::kHeaderBytes, m.header.length);
      // Whatever was accepted must be self-consistent.
      if (auto* r = std::get_if<wire::Result>(&m.body)) {
        size_t total = 0;
        for (auto piece : r->pieces) total += piece.size();
        if (total > m.header.length) abort();
      }
      if (auto* h = std::get_if<wire::Hello>(&m.body)) {
        if (h->rank < 0 || h->rank >= h->nranks) abort();
        // The proof covers exactly the bytes after it, and the blob is their tail.
        if (h->signedPart.size() + wire::kProofBytes != payload.size()) abort();
        if (h->signedPart.data() != payload.data() + wire::kProofBytes) abort();
        if (h->blob.size() + 8 != h->signedPart.size()) abort();
      }
      if (std::holds_alternative<wire::AuthStart>(m.body) ||
          std::holds_alternative<wire::Challenge>(m.body)) {
        // Handshake frames have one exact size and live in round 0.
        size_t want = std::holds_alternative<wire::AuthStart>(m.body)
                          ? wire::kNonceBytes
                          : wire::kNonceBytes + wire::kProofBytes;
        if (payload.size() != want || m.header.group != 0 || m.header.seq != 0) abort();
      }
      ++accepted;
      in = in.subspan(used);
    }
  }
  return accepted;
}

#ifdef NLCCL_LIBFUZZER
#include <cstdio>
#include <filesystem>

#include "bootstrap/fuzz_seeds.hpp"

/// With NLCCL_FUZZ_SEED_DIR set, (re)writes one valid frame of every message type there before
/// fuzzing starts, so a corpus directory named on the command line begins from real frames.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = getenv("NLCCL_FUZZ_SEED_DIR");
  if (dir == nullptr || *dir == '\0') return 0;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // a fresh corpus each run keeps the run bounded
  std::filesystem::create_directories(dir, ec);
  int i = 0;
  for (const auto& seed : nlccl::bootstrap::test::fuzzSeeds()) {
    std::string path = std::string(dir) + "/seed-" + std::to_string(i++);
    if (FILE* f = fopen(path.c_str(), "wb")) {
      fwrite(seed.data(), 1, seed.size(), f);
      fclose(f);
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlcclFuzzBootstrapParser(data, size);
  return 0;
}
#endif

// The routing generator's random numbers: a counter-based seeding (splitmix64 of the seed and a
// stream number, one stream per source rank) into xoshiro256**, so a rank's draws do not depend
// on how many the other ranks made, and the same seed gives the same routing on any platform
// (no std:: distribution, whose results are implementation-defined).
#pragma once

#include <cstdint>
#include <vector>

#define NLCCL_MOE_CHECK(call)                              \
  do {                                                     \
    const ::nlccl::Status s_ = (call);                     \
    if (s_ != ::nlccl::Status::Success) return s_;         \
  } while (0)

namespace nlccl::moe {

class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) {
    uint64_t x = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (uint64_t& w : s_) w = splitmix(&x);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  /// Uniform in [0, 1).
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// Uniform in [0, n) (multiply-shift; the bias is below 2^-32 for the n used here).
  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t splitmix(uint64_t* x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t s_[4];
};

/// Walker/Vose alias table: one weighted draw in O(1).
class AliasTable {
 public:
  explicit AliasTable(const std::vector<double>& w);
  /// One 64-bit draw: the high half of x * n picks the column, the low half is the coin.
  int draw(Rng& rng) const {
    const unsigned __int128 x = static_cast<unsigned __int128>(rng.next()) * prob_.size();
    const uint64_t i = static_cast<uint64_t>(x >> 64);
    const double coin = static_cast<double>(static_cast<uint64_t>(x) >> 11) * 0x1.0p-53;
    return coin < prob_[i] ? static_cast<int>(i) : alias_[i];
  }

 private:
  std::vector<double> prob_;
  std::vector<int> alias_;
};

/// k distinct experts drawn by weight without replacement (successive weighted draws, a repeat
/// redrawn; after many repeats the rest are drawn from the remaining weights directly).
void sampleDistinct(const AliasTable& alias, const std::vector<double>& w, Rng& rng, int k,
                    std::vector<int>* out);

}  // namespace nlccl::moe

#include "util/size_parse.hpp"

#include <limits>

namespace nlccl::util {

bool parseSize(std::string_view text, uint64_t* out, std::string* error) {
  auto fail = [&](const char* why) {
    if (error) *error = why;
    return false;
  };
  constexpr const char* kExpected = "expected a byte count such as 4096, 512K, 4M or 1G";
  size_t i = 0;
  uint64_t v = 0;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    const unsigned d = static_cast<unsigned>(text[i] - '0');
    if (v > (kMax - d) / 10) return fail("size too large (does not fit in 64 bits)");
    v = v * 10 + d;
  }
  if (i == 0) return fail(kExpected);
  unsigned shift = 0;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: break;
    }
    if (shift != 0) {
      ++i;
      if (i < text.size() && text[i] == 'i') ++i;  // "KiB"
    }
  }
  if (i < text.size() && (text[i] == 'B' || text[i] == 'b')) ++i;  // "1MB" is common in scripts
  if (i != text.size()) return fail(kExpected);
  if (v > (kMax >> shift)) return fail("size too large (does not fit in 64 bits)");
  *out = v << shift;
  return true;
}

}  // namespace nlccl::util

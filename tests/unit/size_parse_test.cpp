// Byte sizes with K/M/G suffixes, as the command lines and NLCCL_SHM_* variables take them.
#include <gtest/gtest.h>

#include "util/size_parse.hpp"

namespace {

using nlccl::util::parseSize;

TEST(SizeParseTest, AcceptsNcclTestsSizes) {
  const std::pair<const char*, uint64_t> ok[] = {
      {"0", 0},           {"4096", 4096},         {"8", 8},
      {"512K", 524288},   {"512KiB", 524288},     {"1m", 1048576},
      {"64M", 64ull << 20}, {"1G", 1ull << 30},   {"2GB", 2ull << 30},
      {"8kb", 8192},      {"18446744073709551615", UINT64_MAX}, {"16777215G", 16777215ull << 30}};
  for (auto [text, want] : ok) {
    uint64_t v = 7;
    std::string err;
    EXPECT_TRUE(parseSize(text, &v, &err)) << text << ": " << err;
    EXPECT_EQ(v, want) << text;
  }
}

TEST(SizeParseTest, RefusesWithAReasonAndLeavesTheOutputAlone) {
  for (const char* text : {"", "-1", "1.5M", "1T", "K", "12 K", "17179869184G",
                           "18446744073709551616", "4MM", "0x10"}) {
    uint64_t v = 7;
    std::string err;
    EXPECT_FALSE(parseSize(text, &v, &err)) << text;
    EXPECT_EQ(v, 7u) << text;
    EXPECT_FALSE(err.empty()) << text;
  }
}

}  // namespace

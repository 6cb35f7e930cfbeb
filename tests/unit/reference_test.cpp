// The collective suites' reference (tests/common/reference.hpp) binds: an all-zero or all-max
// output fails for every type, op and rank count the suites use (the old tolerance let an
// all-zero e4m3 result pass at 8 ranks and e5m2 at 3, 4 and 8), and the reference is what the
// library's pairwise kernels compute in any reduction order, so comparing exactly is right.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "common/reference.hpp"

namespace nlccl::testing {
namespace {

constexpr size_t kCount = 1037;
const int kRankCounts[] = {1, 2, 3, 4, 6, 8, 13};

std::vector<double> expected(DataType t, RedOp op, int p) {
  std::vector<double> want;
  for (size_t i = 0; i < kCount; ++i) want.push_back(reduceRef(t, op, p, i));
  return want;
}

std::vector<char> bufferOf(DataType t, const std::function<double(size_t)>& value) {
  std::vector<char> buf(kCount * dataTypeSize(t));
  for (size_t i = 0; i < kCount; ++i) kernels::storeFromDouble(t, buf.data(), i, value(i));
  return buf;
}

size_t mismatches(DataType t, const std::vector<char>& buf, const std::vector<double>& want) {
  size_t n = 0;
  for (size_t i = 0; i < kCount; ++i)
    n += !compare(t, buf.data(), i, 1, {want[i]}).empty();
  return n;
}

std::string label(DataType t, RedOp op, int p) {
  return std::string(dataTypeName(t)) + " " + redOpName(op) + " " + std::to_string(p) + " ranks";
}

TEST(Reference, AllZeroAndAllMaxOutputsFail) {
  for (int ti = 0; ti < kNumDataTypes; ++ti)
    for (int o = 0; o < kNumRedOps; ++o)
      for (int p : kRankCounts) {
        const auto t = static_cast<DataType>(ti);
        const auto op = static_cast<RedOp>(o);
        SCOPED_TRACE(label(t, op, p));
        const auto want = expected(t, op, p);
        const auto right = bufferOf(t, [&](size_t i) { return want[i]; });
        EXPECT_EQ(compare(t, right.data(), 0, kCount, want), "");
        const auto zero = bufferOf(t, [](size_t) { return 0.0; });
        const auto big = bufferOf(t, [](size_t) { return DBL_MAX; });  // saturates or is Inf
        EXPECT_NE(compare(t, zero.data(), 0, kCount, want), "");
        EXPECT_NE(compare(t, big.data(), 0, kCount, want), "");
        // Not by a few elements: most of them are wrong (products are never 0).
        EXPECT_GE(mismatches(t, zero, want), kCount / 3);
        EXPECT_EQ(mismatches(t, big, want), kCount);
      }
}

// Reduces the ranks' inputs with the library's kernels in a given order: a list of (dst, src)
// rank pairs, each one kernel call dst = dst op src; the result is in rank `last`'s buffer.
std::vector<char> reduceInOrder(DataType t, RedOp op, int p,
                                const std::vector<std::pair<int, int>>& order, int last) {
  const size_t es = dataTypeSize(t);
  std::vector<std::vector<char>> bufs(p, std::vector<char>(kCount * es));
  for (int r = 0; r < p; ++r) fill(t, op, r, p, bufs[r].data(), 0, kCount, 0);
  const kernels::ReduceFn fn = kernels::reduceKernel(t, op);
  for (auto [dst, src] : order) fn(bufs[dst].data(), bufs[src].data(), kCount);
  if (op == RedOp::Avg) kernels::divideByCount(t, bufs[last].data(), kCount, p);
  return bufs[last];
}

// The reference does not depend on the order a Plan reduces in: ring order, reverse order and a
// binary tree all give it exactly.
TEST(Reference, EveryReductionOrderGivesTheReference) {
  for (int ti = 0; ti < kNumDataTypes; ++ti)
    for (int o = 0; o < kNumRedOps; ++o)
      for (int p : kRankCounts) {
        const auto t = static_cast<DataType>(ti);
        const auto op = static_cast<RedOp>(o);
        SCOPED_TRACE(label(t, op, p));
        std::vector<std::pair<int, int>> forward, backward, tree;
        for (int r = 1; r < p; ++r) forward.push_back({r, r - 1});  // ends in rank p-1
        for (int r = p - 2; r >= 0; --r) backward.push_back({r, r + 1});  // ends in rank 0
        for (int step = 1; step < p; step *= 2)  // ends in rank 0
          for (int r = 0; r + step < p; r += 2 * step) tree.push_back({r, r + step});
        const auto want = expected(t, op, p);
        for (const auto& [order, last] : {std::pair{forward, p - 1}, std::pair{backward, 0},
                                          std::pair{tree, 0}}) {
          const auto got = reduceInOrder(t, op, p, order, last);
          EXPECT_EQ(compare(t, got.data(), 0, kCount, want), "");
        }
      }
}

// At 2 ranks the low-precision inputs need rounding, ties included, and ties go both ways
// (to the even neighbour above and below): a kernel that truncates, or rounds ties the wrong way,
// gives another result for many elements.
TEST(Reference, TwoRanksExerciseRounding) {
  for (DataType t : {DataType::Float16, DataType::Bfloat16, DataType::Float8e4m3,
                     DataType::Float8e5m2}) {
    SCOPED_TRACE(dataTypeName(t));
    const int man = smallFormat(t).man;
    size_t inexact = 0, tiesUp = 0, tiesDown = 0;
    for (size_t i = 0; i < kCount; ++i) {
      const double exact = inputValue(t, RedOp::Sum, 0, i, 2) + inputValue(t, RedOp::Sum, 1, i, 2);
      const double got = reduceRef(t, RedOp::Sum, 2, i);
      inexact += got != exact;
      if (exact == 0) continue;
      const double ulp = std::ldexp(1.0, std::ilogb(exact) - man);
      const double q = std::fabs(exact) / ulp;
      if (q - std::floor(q) == 0.5) (std::fabs(got) > std::fabs(exact) ? tiesUp : tiesDown) += 1;
    }
    EXPECT_GE(inexact, kCount / 4);
    EXPECT_GE(tiesUp, kCount / 20);
    EXPECT_GE(tiesDown, kCount / 20);
  }
}

}  // namespace
}  // namespace nlccl::testing

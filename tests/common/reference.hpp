// Test data and exact reference results for collectives, compared exactly (no tolerance).
//
// The library reduces pairwise: every kernel call widens fp16/bf16/fp8 to fp32, computes
// dst op src and rounds once to the storage type (src/kernels/reduce.hpp), and the order in which
// a Plan combines partial results differs between algorithms (ring, tree, rhd, hier...). So the
// exact result of a reduction over p > 2 ranks generally depends on the algorithm. The inputs are
// therefore chosen so that the documented arithmetic is exact in *every* order:
// - p != 2: small integers (sums), signed powers of two {2, 0.5, 1, -1} (products), with at most
//   exactMax(type) / |value| contributing ranks per element, so every partial sum or product of
//   any subset of ranks is representable in the type (e4m3 holds the integers up to 16, e5m2 up
//   to 8, bf16 up to 256). The reference is then the exact result, whatever the order.
// - p == 2 and fp16/bf16/fp8: values with a full mantissa and exponents -2..3, so a + b and a * b
//   need rounding. Any Plan computes one kernel call a op b (commutative), so the reference is
//   the exact result rounded once to nearest even (an independent rounding written from the
//   formats' definition, not the library's conversions); Avg is round(round(a + b) / 2): the sum
//   is rounded by the kernel, then divided once at the end.
// An all-zero or all-max output can therefore never pass (tests/unit/reference_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "util/dtype.hpp"

namespace nlccl::testing {

/// fp16, bf16 and the two fp8 formats: the types that widen to fp32 and round per kernel call.
inline bool lowPrecision(DataType t) {
  return t == DataType::Float16 || t == DataType::Bfloat16 || t == DataType::Float8e4m3 ||
         t == DataType::Float8e5m2;
}

/// The largest integer up to which every integer is exactly representable (ints: no limit here).
inline int64_t exactMax(DataType t) {
  switch (t) {
    case DataType::Float16: return 2048;
    case DataType::Bfloat16: return 256;
    case DataType::Float8e4m3: return 16;
    case DataType::Float8e5m2: return 8;
    default: return int64_t{1} << 24;
  }
}

/// Mantissa bits, minimum normal exponent, largest finite value and overflow rule of a
/// low-precision format (from its definition: OCP fp8, IEEE binary16, bfloat16).
struct SmallFormat {
  int man;
  int minExp;
  double maxFinite;
  bool saturates;  ///< e4m3 has no Inf: overflow gives the largest finite value
};

inline SmallFormat smallFormat(DataType t) {
  switch (t) {
    case DataType::Float16: return {10, -14, 65504.0, false};
    case DataType::Bfloat16: return {7, -126, std::ldexp(255.0, 120), false};
    case DataType::Float8e4m3: return {3, -6, 448.0, true};
    default: return {2, -14, 57344.0, false};  // e5m2
  }
}

/// x rounded once to nearest even in a low-precision type (x is finite).
inline double roundTo(DataType t, double x) {
  const SmallFormat f = smallFormat(t);
  if (x == 0) return x;
  int e = std::ilogb(x);
  if (e < f.minExp) e = f.minExp;  // subnormals share the smallest normal's spacing
  const double ulp = std::ldexp(1.0, e - f.man);
  double r = std::nearbyint(x / ulp) * ulp;  // ties to even in the default rounding mode
  if (std::fabs(r) > f.maxFinite) {
    const double next = std::ldexp(1.0, std::ilogb(f.maxFinite) + 1);  // 2^(emax+1)
    if (f.saturates || std::fabs(x) < (f.maxFinite + next) / 2)
      r = std::copysign(f.maxFinite, x);
    else
      r = std::copysign(std::numeric_limits<double>::infinity(), x);
  }
  return r;
}

/// splitmix64's finalizer: well-mixed bits of (element, rank), so that mantissas, exponents and
/// signs of the two ranks are independent (ties rounding up and down both occur).
inline uint64_t mix(size_t i, int rank) {
  uint64_t x = (static_cast<uint64_t>(i) << 8) + static_cast<uint64_t>(rank) + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// For p == 2: a low-precision value with a full mantissa (1.m x 2^e, e in -2..3; products -1..1).
inline double roundingValue(DataType t, RedOp op, int rank, size_t i) {
  const int man = smallFormat(t).man;
  const uint64_t h = mix(i, rank);
  const double m = 1.0 + static_cast<double>(h % (1u << man)) / (1u << man);
  const int e = op == RedOp::Prod ? static_cast<int>((h >> 16) % 3) - 1
                                  : static_cast<int>((h >> 16) % 6) - 2;
  const bool neg = op != RedOp::Prod && ((h >> 24) & 1) != 0;
  return (neg ? -1 : 1) * std::ldexp(m, e);
}

/// True when rank `rank` contributes to element i (else it holds the identity): at most `limit`
/// ranks of p contribute to each element, and every rank to some elements.
inline bool contributes(int rank, size_t i, int nranks, int64_t limit) {
  if (nranks <= limit) return true;
  const int64_t g = (nranks + limit - 1) / limit;  // contributors <= ceil(p / g) <= limit
  return (static_cast<int64_t>(rank) + static_cast<int64_t>(i)) % g == 0;
}

/// Input element i of rank r of p for op (see the file comment).
inline double inputValue(DataType t, RedOp op, int rank, size_t i, int nranks) {
  if (nranks == 2 && lowPrecision(t)) return roundingValue(t, op, rank, i);
  const bool isSigned =
      t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64 || isFloating(t);
  if (op == RedOp::Prod) {
    // Products of up to 8 powers of two in 2^-8..2^8: exact in every floating type.
    if (isFloating(t) && !contributes(rank, i, nranks, 8)) return 1.0;
    int k = static_cast<int>((i * 7 + rank * 3) % 4);
    if (isFloating(t)) return k == 0 ? 2.0 : k == 1 ? 0.5 : 1.0;
    return k == 0 ? 2.0 : (k == 1 && isSigned) ? -1.0 : 1.0;
  }
  if (op == RedOp::Max || op == RedOp::Min) {
    // 1..7, never 0: the minimum of unsigned values would otherwise be 0 from 8 ranks on.
    double v = static_cast<double>(1 + mix(i, rank) % 7);
    return (isSigned && (i + rank) % 3 == 0) ? -v : v;
  }
  // Magnitudes up to vmax with at most exactMax / vmax contributors: partial sums stay exact.
  const int64_t room = exactMax(t) / std::max(nranks, 1);
  const int64_t vmax = std::min<int64_t>(7, std::max<int64_t>(1, room));
  if (!contributes(rank, i, nranks, exactMax(t) / vmax)) return 0.0;
  double v = static_cast<double>((i * 13 + rank * 5 + 1) % static_cast<size_t>(vmax + 1));
  return (isSigned && v != 0 && (i + rank) % 3 == 0) ? -v : v;
}

inline void fill(DataType t, RedOp op, int rank, int nranks, void* buf, size_t offset,
                 size_t count, size_t valueBase) {
  for (size_t i = 0; i < count; ++i)
    kernels::storeFromDouble(t, buf, offset + i, inputValue(t, op, rank, valueBase + i, nranks));
}

/// The ranks' values of element i reduced with op, as the library's arithmetic gives it (exactly:
/// see the file comment). Avg divides once at the end (integers truncate toward zero).
inline double reduceRef(DataType t, RedOp op, int nranks, size_t i) {
  if (nranks == 2 && lowPrecision(t)) {
    const double a = inputValue(t, op, 0, i, 2), b = inputValue(t, op, 1, i, 2);
    switch (op) {
      case RedOp::Sum: return roundTo(t, a + b);
      case RedOp::Avg: return roundTo(t, roundTo(t, a + b) / 2);
      case RedOp::Prod: return roundTo(t, a * b);
      case RedOp::Max: return std::max(a, b);
      case RedOp::Min: return std::min(a, b);
    }
  }
  double acc = inputValue(t, op, 0, i, nranks);
  for (int r = 1; r < nranks; ++r) {
    double v = inputValue(t, op, r, i, nranks);
    switch (op) {
      case RedOp::Sum:
      case RedOp::Avg: acc += v; break;
      case RedOp::Prod: acc *= v; break;
      case RedOp::Max: acc = std::max(acc, v); break;
      case RedOp::Min: acc = std::min(acc, v); break;
    }
  }
  if (op == RedOp::Avg) {
    if (!isFloating(t)) return std::trunc(acc / nranks);
    return lowPrecision(t) ? roundTo(t, acc / nranks)
                           : t == DataType::Float32 ? static_cast<float>(acc / nranks)
                                                    : acc / nranks;
  }
  return acc;
}

/// Wraps an exact integer result like the type does (two's complement).
inline double wrapInteger(DataType t, double v) {
  int64_t x = static_cast<int64_t>(v);
  switch (t) {
    case DataType::Int8: return static_cast<int8_t>(x);
    case DataType::Uint8: return static_cast<uint8_t>(x);
    case DataType::Int32: return static_cast<int32_t>(x);
    case DataType::Uint32: return static_cast<uint32_t>(x);
    case DataType::Int64: return static_cast<double>(x);
    case DataType::Uint64: return static_cast<double>(static_cast<uint64_t>(x));
    default: return v;
  }
}

/// Empty when every element equals its expected value exactly (+0 and -0 compare equal: Max/Min
/// may return either); otherwise a description of the first mismatch.
inline std::string compare(DataType t, const void* buf, size_t offset, size_t count,
                           const std::vector<double>& expected) {
  for (size_t i = 0; i < count; ++i) {
    double want = isFloating(t) ? expected[i] : wrapInteger(t, expected[i]);
    double got = kernels::loadAsDouble(t, buf, offset + i);
    if (!(got == want))
      return "element " + std::to_string(i) + ": got " + std::to_string(got) + ", expected " +
             std::to_string(want) + " (exactly)";
  }
  return "";
}

}  // namespace nlccl::testing

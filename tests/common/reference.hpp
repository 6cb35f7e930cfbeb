// Test data and reference results for collectives: every input value is exactly representable in
// its type, the reference is computed in double (exact for the small integers used) and wrapped
// like the type for integers; floats are compared with a tolerance that grows with rank count.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "util/dtype.hpp"

namespace nlccl::testing {

/// Input element i of rank r for op: small integers (sums), {1, 2, 0.5 or -1} (products).
inline double inputValue(DataType t, RedOp op, int rank, size_t i) {
  if (op == RedOp::Prod) {
    int k = static_cast<int>((i * 7 + rank * 3) % 4);
    if (isFloating(t)) return k == 0 ? 2.0 : k == 1 ? 0.5 : 1.0;
    bool isSigned = t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64;
    return k == 0 ? 2.0 : (k == 1 && isSigned) ? -1.0 : 1.0;
  }
  double v = static_cast<double>((i * 13 + rank * 5 + 1) % 8);
  bool isSigned = t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64 || isFloating(t);
  return (isSigned && (i + rank) % 3 == 0) ? -v : v;
}

inline void fill(DataType t, RedOp op, int rank, void* buf, size_t offset, size_t count,
                 size_t valueBase) {
  for (size_t i = 0; i < count; ++i)
    kernels::storeFromDouble(t, buf, offset + i, inputValue(t, op, rank, valueBase + i));
}

/// Reduces the ranks' values of element i with op (Avg divides at the end).
inline double reduceRef(DataType t, RedOp op, int nranks, size_t i) {
  double acc = inputValue(t, op, 0, i);
  for (int r = 1; r < nranks; ++r) {
    double v = inputValue(t, op, r, i);
    switch (op) {
      case RedOp::Sum:
      case RedOp::Avg: acc += v; break;
      case RedOp::Prod: acc *= v; break;
      case RedOp::Max: acc = std::max(acc, v); break;
      case RedOp::Min: acc = std::min(acc, v); break;
    }
  }
  if (op == RedOp::Avg) {
    if (isFloating(t)) return acc / nranks;
    return std::trunc(acc / nranks);
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

/// Relative tolerance for floats after p-1 reductions (one rounding each), 0 for integers.
inline double tolerance(DataType t, int nranks) {
  double ulp = 0;
  switch (t) {
    case DataType::Float16: ulp = std::ldexp(1.0, -10); break;
    case DataType::Bfloat16: ulp = std::ldexp(1.0, -7); break;
    case DataType::Float32: ulp = std::ldexp(1.0, -23); break;
    case DataType::Float64: ulp = std::ldexp(1.0, -52); break;
    case DataType::Float8e4m3: ulp = std::ldexp(1.0, -3); break;
    case DataType::Float8e5m2: ulp = std::ldexp(1.0, -2); break;
    default: return 0;
  }
  return ulp * (nranks + 1);
}

/// Empty when got matches expected; otherwise a description of the first mismatch.
inline std::string compare(DataType t, const void* buf, size_t offset, size_t count,
                           const std::vector<double>& expected, int nranks) {
  double tol = tolerance(t, nranks);
  for (size_t i = 0; i < count; ++i) {
    double want = isFloating(t) ? expected[i] : wrapInteger(t, expected[i]);
    double got = kernels::loadAsDouble(t, buf, offset + i);
    double scale = std::max(1.0, std::fabs(want));
    if (!(std::fabs(got - want) <= tol * scale))
      return "element " + std::to_string(i) + ": got " + std::to_string(got) + ", expected " +
             std::to_string(want);
  }
  return "";
}

}  // namespace nlccl::testing

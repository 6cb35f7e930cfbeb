// Reduction kernels for every (data type, operator): dst = dst op src, element-wise. fp16, bf16 and
// the fp8 formats are widened to fp32 per element and rounded once (round to nearest even).
// Avg reduces as Sum; the engine divides once at the end with divideByCount.
//
// Semantics shared by every kernel:
// - Integer Sum/Prod wrap modulo 2^n (two's complement for the signed types).
// - Float Sum/Prod round once to the storage type; fp32/fp64 use native arithmetic. For fp16, bf16
//   and fp8 the fp32 intermediate cannot cause double rounding: fp32 carries at least twice their
//   precision plus two bits, so the result equals the exact result rounded once.
// - Max/Min return one of the two inputs bit for bit. NaN propagates: if either input is NaN the
//   result is NaN (src's if src is NaN, else dst's). Between +0 and -0 either may be returned.
// - dst and src may be the same buffer but must not partially overlap.
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/dtype.hpp"

namespace nlccl::kernels {

/// dst[i] = dst[i] op src[i] for `count` elements.
using ReduceFn = void (*)(void* dst, const void* src, size_t count);

/// The kernel for (type, op); Avg returns the Sum kernel. Never null for valid enums.
ReduceFn reduceKernel(DataType type, RedOp op);

/// dst[i] = a[i] op b[i] for `count` elements: the out-of-place form, one sweep (read a, read b,
/// write dst). dst must not overlap a or b. Bit for bit what copying a into dst and then
/// ReduceFn(dst, b) gives.
using Reduce3Fn = void (*)(void* dst, const void* a, const void* b, size_t count);

/// The out-of-place kernel for (type, op); Avg returns the Sum kernel. Never null for valid enums.
Reduce3Fn reduce3Kernel(DataType type, RedOp op);

/// dst = src op incoming for `count` elements, with `fn` and `fn3` of one (type, op): fn3 in one
/// sweep, or fn(dst, incoming) when dst is src. Otherwise no two of the buffers may overlap.
inline void reduceCopy(ReduceFn fn, Reduce3Fn fn3, void* dst, const void* src,
                       const void* incoming, size_t count) {
  if (count == 0) return;
  if (dst == src) fn(dst, incoming, count);
  else fn3(dst, src, incoming, count);
}

/// data[i] = data[i] / n (the final step of Avg). Integers divide with truncation toward zero;
/// floating types compute the quotient in double and round once to the storage type. n <= 1 is a
/// no-op.
void divideByCount(DataType type, void* data, size_t count, int n);

// Conversions used by the kernels and by tests (round to nearest even; NaN and Inf preserved;
// fp8 e4m3 saturates to its largest finite value 448, as OCP "satfinite" does, since it has no Inf:
// overflow and +-Inf give +-448, NaN gives S.1111.111). e5m2 follows IEEE: overflow rounds to Inf.
// Widening is exact, subnormals included. Narrowing a NaN keeps the sign and the top payload bits
// (a payload that would become zero is replaced by the quiet bit), so every NaN stays NaN.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);
float fp8e4m3ToFloat(uint8_t v);
uint8_t floatToFp8e4m3(float f);
float fp8e5m2ToFloat(uint8_t v);
uint8_t floatToFp8e5m2(float f);

/// Reads element i of a typed buffer as double, and writes a double into it. For tests and
/// reference computations, not hot paths. Floating types round the double once (nearest even, the
/// same overflow rules as above); integer types truncate toward zero and saturate (NaN gives 0).
double loadAsDouble(DataType type, const void* buf, size_t i);
void storeFromDouble(DataType type, void* buf, size_t i, double v);

}  // namespace nlccl::kernels

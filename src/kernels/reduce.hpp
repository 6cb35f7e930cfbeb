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

/// dst = src op incoming for `count` elements of `elemSize` bytes, with `fn` from reduceKernel:
/// block by block (kReduceCopyBlockBytes, cache-sized), src's block is copied into dst and then
/// `fn(dst, incoming)` runs on it while it is still in cache, so memory is swept once (read src,
/// read incoming, write dst) instead of twice. dst may be src (then this is fn(dst, incoming));
/// otherwise no two of the buffers may overlap. Element order and rounding are fn's.
void reduceCopy(ReduceFn fn, void* dst, const void* src, const void* incoming,
                size_t count, size_t elemSize);
constexpr size_t kReduceCopyBlockBytes = 16 * 1024;

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

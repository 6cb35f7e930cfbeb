// dst[i] = src[i] * scalar: the local half of a PreMulSum reduction (nlcclRedOpCreatePreMulSum
// multiplies each rank's input, then sums). Integers multiply modulo 2^n (as Sum and Prod wrap);
// fp32 and fp64 natively; fp16, bf16 and the fp8 formats in fp32, where the product of two such
// values is exact, so each element rounds once to the storage type.
#pragma once

#include <cstddef>

#include "util/dtype.hpp"

namespace nlccl::kernels {

/// `scalar` points at one element of `type`. dst may be src; otherwise they must not overlap.
void scaleCopy(DataType type, void* dst, const void* src, size_t count, const void* scalar);

}  // namespace nlccl::kernels

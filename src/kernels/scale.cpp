#include "kernels/scale.hpp"

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/reduce.hpp"

namespace nlccl::kernels {
namespace {

template <typename T>
void scaleNative(void* dst, const void* src, size_t n, const void* scalar) {
  T s;
  std::memcpy(&s, scalar, sizeof s);
  auto* d = static_cast<T*>(dst);
  const auto* x = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      d[i] = static_cast<T>(static_cast<U>(static_cast<U>(x[i]) * static_cast<U>(s)));
    } else {
      d[i] = x[i] * s;
    }
  }
}

template <typename Storage, float (*widen)(Storage), Storage (*narrow)(float)>
void scaleSmall(void* dst, const void* src, size_t n, const void* scalar) {
  Storage sb;
  std::memcpy(&sb, scalar, sizeof sb);
  const float s = widen(sb);
  auto* d = static_cast<Storage*>(dst);
  const auto* x = static_cast<const Storage*>(src);
  for (size_t i = 0; i < n; ++i) d[i] = narrow(widen(x[i]) * s);
}

}  // namespace

void scaleCopy(DataType type, void* dst, const void* src, size_t count, const void* scalar) {
  switch (type) {
    case DataType::Int8: return scaleNative<int8_t>(dst, src, count, scalar);
    case DataType::Uint8: return scaleNative<uint8_t>(dst, src, count, scalar);
    case DataType::Int32: return scaleNative<int32_t>(dst, src, count, scalar);
    case DataType::Uint32: return scaleNative<uint32_t>(dst, src, count, scalar);
    case DataType::Int64: return scaleNative<int64_t>(dst, src, count, scalar);
    case DataType::Uint64: return scaleNative<uint64_t>(dst, src, count, scalar);
    case DataType::Float32: return scaleNative<float>(dst, src, count, scalar);
    case DataType::Float64: return scaleNative<double>(dst, src, count, scalar);
    case DataType::Float16: return scaleSmall<uint16_t, halfToFloat, floatToHalf>(dst, src, count, scalar);
    case DataType::Bfloat16: return scaleSmall<uint16_t, bf16ToFloat, floatToBf16>(dst, src, count, scalar);
    case DataType::Float8e4m3:
      return scaleSmall<uint8_t, fp8e4m3ToFloat, floatToFp8e4m3>(dst, src, count, scalar);
    case DataType::Float8e5m2:
      return scaleSmall<uint8_t, fp8e5m2ToFloat, floatToFp8e5m2>(dst, src, count, scalar);
  }
}

}  // namespace nlccl::kernels

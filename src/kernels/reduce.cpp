// Reduction kernels and the small-float conversions they are built on. Every kernel is a plain loop
// over restrict pointers with branch-free bodies (selects, not branches), so that g++ -O3
// auto-vectorises it; the conversions are therefore written with bit arithmetic and ternaries
// rather than lookup tables or early returns. Each (type, op) has an in-place kernel (dst op= src)
// and an out-of-place one (dst = a op b). The exceptions, on x86-64-v3 CPUs: fp16 (every op) and
// bf16 Sum and Prod, which g++ vectorises poorly or not at all, are written with AVX2/F16C
// intrinsics, to the codecs' bits.
#include "kernels/reduce.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// On x86-64 with GCC every kernel is also compiled for x86-64-v3 (AVX2, F16C), picked at load
// time by an ifunc: with only baseline SSE2 the narrow-float kernels run at half speed or less.
// Not under ThreadSanitizer: its instrumented resolvers run before it is set up, and crash.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__)
#define NLCCL_X86_CLONES 1
#define NLCCL_KERNEL_ATTR __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define NLCCL_X86_CLONES 0
#define NLCCL_KERNEL_ATTR
#endif

namespace nlccl::kernels {
namespace {

inline uint32_t bitsOf(float f) { return std::bit_cast<uint32_t>(f); }
inline float floatOf(uint32_t u) { return std::bit_cast<float>(u); }

// c ? a : b as bit arithmetic. With a ternary g++ sinks each operand's computation into its own
// branch and then, since fp operations may trap, refuses to if-convert the loop for vectorisation.
inline uint32_t pick(bool c, uint32_t a, uint32_t b) { return b ^ ((a ^ b) & (0u - c)); }

// A binary floating-point format with kExp exponent bits and kMan mantissa bits stored in the low
// bits of an unsigned integer. kHasInf: IEEE-like (all-ones exponent = Inf/NaN); otherwise the
// OCP E4M3 convention (only S.1111.111 is NaN, no Inf, overflow saturates to the largest finite).
template <typename StorageT, int kExp, int kMan, bool kHasInf>
struct SmallFloat {
  using Storage = StorageT;
  using Compute = float;
  static constexpr int kBias = (1 << (kExp - 1)) - 1;
  static constexpr int kShift = 23 - kMan;  // mantissa alignment against fp32
  static constexpr int kSignShift = 31 - kExp - kMan;
  static constexpr uint32_t kSignBit = 1u << (kExp + kMan);
  static constexpr uint32_t kAbsMask = kSignBit - 1;
  static constexpr uint32_t kManMask = (1u << kMan) - 1;
  static constexpr uint32_t kExpAllOnes = ((1u << kExp) - 1) << kMan;
  // Encodings (magnitude) at or above kSpecial are Inf/NaN (IEEE) or NaN (E4M3).
  static constexpr uint32_t kSpecial = kHasInf ? kExpAllOnes : kAbsMask;
  static constexpr uint32_t kMaxFinite = kHasInf ? kExpAllOnes - 1 : kAbsMask - 1;
  static constexpr uint32_t kRebias = uint32_t(127 - kBias) << 23;
  // fp32 bit pattern of the format's smallest normal number, 2^(1-bias).
  static constexpr uint32_t kMinNormalF32 = uint32_t(127 + 1 - kBias) << 23;
  // The value of the smallest subnormal, 2^(1-bias-man).
  static constexpr float kSubUnit = std::bit_cast<float>(uint32_t(127 + 1 - kBias - kMan) << 23);
  // Adding 2^(1-bias-man+23) puts the smallest subnormal at fp32's last mantissa bit, so the fp32
  // adder itself rounds to nearest even onto the subnormal grid.
  static constexpr float kSubMagic = std::bit_cast<float>(uint32_t(127 + 1 - kBias - kMan + 23) << 23);
  static constexpr bool kSameRangeAsF32 = kExp == 8;  // bf16: fp32's own subnormals cover it

  static float decode(Storage v) {
    uint32_t u = v;
    if constexpr (kSameRangeAsF32) {
      return floatOf(u << kShift);  // bf16 is the top half of an fp32
    } else {
      uint32_t sign = (u & kSignBit) << kSignShift;
      uint32_t em = u & kAbsMask;
      uint32_t normal = (em << kShift) + kRebias;
      uint32_t special = (em << kShift) | 0x7f800000u;  // keeps the NaN payload
      uint32_t bits = pick(em >= kSpecial, special, normal);
      float sub = static_cast<float>(static_cast<int32_t>(em)) * kSubUnit;  // exact
      return floatOf(pick(em < (1u << kMan), bitsOf(sub), bits) | sign);
    }
  }

  static Storage encode(float f) {
    uint32_t x = bitsOf(f);
    uint32_t sign = x & 0x80000000u;
    uint32_t a = x ^ sign;
    // NaN: keep the top payload bits; a payload that truncates to zero becomes the quiet NaN.
    uint32_t payload = (a >> kShift) & kManMask;
    uint32_t nan = kHasInf ? (kExpAllOnes | payload | pick(payload == 0, 1u << (kMan - 1), 0u))
                           : kAbsMask;
    // Normal numbers: add just under half an ulp plus the kept lsb, truncate (nearest even).
    uint32_t odd = (a >> kShift) & 1u;
    uint32_t r = (a - kRebias + ((1u << (kShift - 1)) - 1) + odd) >> kShift;
    if constexpr (!kSameRangeAsF32) {
      uint32_t sub = bitsOf(floatOf(a) + kSubMagic) - bitsOf(kSubMagic);
      r = pick(a < kMinNormalF32, sub, r);
      // Overflow: IEEE formats round to Inf (kExpAllOnes); E4M3 saturates (Inf too).
      uint32_t cap = kHasInf ? kExpAllOnes : kMaxFinite;
      r = pick(r > cap, cap, r);
    }
    r = pick(a > 0x7f800000u, nan, r);
    return static_cast<Storage>(r | (sign >> kSignShift));
  }
};

using Half = SmallFloat<uint16_t, 5, 10, true>;
using Bf16 = SmallFloat<uint16_t, 8, 7, true>;
using E4m3 = SmallFloat<uint8_t, 4, 3, false>;
using E5m2 = SmallFloat<uint8_t, 5, 2, true>;

#if NLCCL_X86_CLONES
// fp16 through _Float16, which g++ converts with the F16C instructions (round to nearest even,
// NaN quieted) in the x86-64-v3 clone. Used only when the CPU has x86-64-v3: the baseline clone
// would call libgcc's scalar conversions instead.
struct HalfHw {
  using Storage = uint16_t;
  using Compute = float;
  static float decode(uint16_t v) { return static_cast<float>(std::bit_cast<_Float16>(v)); }
  static uint16_t encode(float f) { return std::bit_cast<uint16_t>(static_cast<_Float16>(f)); }
};
#endif

// Native types: storage and computation coincide.
template <typename T>
struct Native {
  using Storage = T;
  using Compute = T;
  static T decode(T v) { return v; }
  static T encode(T v) { return v; }
};

// Integer arithmetic happens in an unsigned type at least as wide as unsigned int, so that overflow
// wraps modulo 2^n instead of being undefined (uint8 * uint8 would otherwise promote to int).
template <typename T>
using WrapT = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct SumOp {
  template <class C>
  static typename C::Storage apply(typename C::Storage a, typename C::Storage b) {
    using S = typename C::Storage;
    if constexpr (std::is_integral_v<typename C::Compute>) {
      return static_cast<S>(static_cast<WrapT<S>>(a) + static_cast<WrapT<S>>(b));
    } else {
      return C::encode(C::decode(a) + C::decode(b));
    }
  }
};

struct ProdOp {
  template <class C>
  static typename C::Storage apply(typename C::Storage a, typename C::Storage b) {
    using S = typename C::Storage;
    if constexpr (std::is_integral_v<typename C::Compute>) {
      return static_cast<S>(static_cast<WrapT<S>>(a) * static_cast<WrapT<S>>(b));
    } else {
      return C::encode(C::decode(a) * C::decode(b));
    }
  }
};

// Max/Min select one of the two stored values (no rounding). NaN propagates: when src is NaN the
// result is src; when dst is NaN (and src is not) it stays.
struct MaxOp {
  template <class C>
  static typename C::Storage apply(typename C::Storage a, typename C::Storage b) {
    auto x = C::decode(a), y = C::decode(b);
    bool takeSrc = (y > x) || (y != y);
    return takeSrc ? b : a;
  }
};

struct MinOp {
  template <class C>
  static typename C::Storage apply(typename C::Storage a, typename C::Storage b) {
    auto x = C::decode(a), y = C::decode(b);
    bool takeSrc = (y < x) || (y != y);
    return takeSrc ? b : a;
  }
};

// dst and src may be the same buffer but must not partially overlap.
template <class C, class Op>
NLCCL_KERNEL_ATTR void kernel(void* dstv, const void* srcv, size_t count) {
  using S = typename C::Storage;
  S* __restrict dst = static_cast<S*>(dstv);
  const S* __restrict src = static_cast<const S*>(srcv);
  for (size_t i = 0; i < count; ++i) dst[i] = Op::template apply<C>(dst[i], src[i]);
}

// dst, a and b must not overlap. Op sees (a, b) as kernel sees (dst, src): the same bits.
template <class C, class Op>
NLCCL_KERNEL_ATTR void kernel3(void* dstv, const void* av, const void* bv, size_t count) {
  using S = typename C::Storage;
  S* __restrict dst = static_cast<S*>(dstv);
  const S* __restrict a = static_cast<const S*>(av);
  const S* __restrict b = static_cast<const S*>(bv);
  for (size_t i = 0; i < count; ++i) dst[i] = Op::template apply<C>(a[i], b[i]);
}

template <class C>
constexpr ReduceFn kRow[4] = {&kernel<C, SumOp>, &kernel<C, ProdOp>,
                                         &kernel<C, MaxOp>, &kernel<C, MinOp>};
template <class C>
constexpr Reduce3Fn kRow3[4] = {&kernel3<C, SumOp>, &kernel3<C, ProdOp>, &kernel3<C, MaxOp>,
                                &kernel3<C, MinOp>};

// Indexed by DataType then RedOp (Sum, Prod, Max, Min).
constexpr const ReduceFn* kKernels[kNumDataTypes] = {
    kRow<Native<int8_t>>,   kRow<Native<uint8_t>>,  kRow<Native<int32_t>>, kRow<Native<uint32_t>>,
    kRow<Native<int64_t>>,  kRow<Native<uint64_t>>, kRow<Half>,            kRow<Native<float>>,
    kRow<Native<double>>,   kRow<Bf16>,             kRow<E4m3>,            kRow<E5m2>,
};
constexpr const Reduce3Fn* kKernels3[kNumDataTypes] = {
    kRow3<Native<int8_t>>,  kRow3<Native<uint8_t>>, kRow3<Native<int32_t>>, kRow3<Native<uint32_t>>,
    kRow3<Native<int64_t>>, kRow3<Native<uint64_t>>, kRow3<Half>,           kRow3<Native<float>>,
    kRow3<Native<double>>,  kRow3<Bf16>,            kRow3<E4m3>,            kRow3<E5m2>,
};
#if NLCCL_X86_CLONES
// Eight fp16 lanes of a op b. Sum and Prod convert through F16C and back (vcvtph2ps, and vcvtps2ph
// with the current rounding mode: HalfHw's conversions, so HalfHw's bits). Max and Min make
// MaxOp's and MinOp's choice (b where it compares greater, or less, or is NaN; a otherwise) on
// the values F16C converts exactly, then keep the stored bits of the one chosen: nothing rounds.
template <class Op>
__attribute__((target("avx2,f16c"))) inline __m128i half8(__m128i ha, __m128i hb) {
  const __m256 x = _mm256_cvtph_ps(ha), y = _mm256_cvtph_ps(hb);
  if constexpr (std::is_same_v<Op, SumOp> || std::is_same_v<Op, ProdOp>) {
    const __m256 r = std::is_same_v<Op, SumOp> ? _mm256_add_ps(x, y) : _mm256_mul_ps(x, y);
    return _mm256_cvtps_ph(r, _MM_FROUND_CUR_DIRECTION);
  } else {
    const __m256 better = std::is_same_v<Op, MaxOp> ? _mm256_cmp_ps(y, x, _CMP_GT_OQ)
                                                    : _mm256_cmp_ps(y, x, _CMP_LT_OQ);
    const __m256i take = _mm256_castps_si256(_mm256_or_ps(better, _mm256_cmp_ps(y, y, _CMP_UNORD_Q)));
    const __m128i take16 =
        _mm_packs_epi32(_mm256_castsi256_si128(take), _mm256_extracti128_si256(take, 1));
    return _mm_blendv_epi8(ha, hb, take16);
  }
}

// fp16, 8 lanes at a time (g++ 12 converts _Float16 one element at a time: 2 GB/s here); the
// tail runs HalfHw itself. dst may be a.
template <class Op>
__attribute__((target("avx2,f16c"))) void halfF16c(void* dstv, const void* av, const void* bv,
                                                  size_t count) {
  uint16_t* dst = static_cast<uint16_t*>(dstv);
  const uint16_t* a = static_cast<const uint16_t*>(av);
  const uint16_t* b = static_cast<const uint16_t*>(bv);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i ha = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i));
    const __m128i hb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), half8<Op>(ha, hb));
  }
  for (; i < count; ++i) dst[i] = Op::template apply<HalfHw>(a[i], b[i]);
}

// An out-of-place kernel that allows dst == a, as the in-place kernel.
template <Reduce3Fn Fn>
void inPlace(void* dst, const void* src, size_t count) {
  Fn(dst, dst, src, count);
}

// Sum or Prod of eight fp32 lanes given as their bits.
template <class Op>
__attribute__((target("avx2"))) inline __m256 apply8(__m256i x, __m256i y) {
  const __m256 fx = _mm256_castsi256_ps(x), fy = _mm256_castsi256_ps(y);
  return std::is_same_v<Op, SumOp> ? _mm256_add_ps(fx, fy) : _mm256_mul_ps(fx, fy);
}

// fp32 lanes to bf16 (in the low half of each lane) as the Bf16 codec rounds: nearest even,
// which carries from the mantissa into the exponent and never into the sign; a NaN keeps its top
// payload bits. (The codec's quieting of a payload that truncates to zero cannot arise for the
// results of x86 arithmetic, which are quiet NaNs: fp32 bit 22 survives the truncation.)
__attribute__((target("avx2"))) inline __m256i bf16Round(__m256 f) {
  const __m256i x = _mm256_castps_si256(f);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), odd), 16);
  const __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  const __m256i isNan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  return _mm256_blendv_epi8(r, _mm256_srli_epi32(x, 16), isNan);
}

// bf16 Sum and Prod, 16 lanes at a time with AVX2, the same bits as the Bf16 codec (which g++
// vectorises only to 5 GB/s here; the tail runs the codec). Unpacking the halves against zero
// puts each bf16 in the top of a 32-bit lane (its fp32 value); packing the rounded lanes back
// restores the order, since both work within 128-bit lanes.
template <class Op>
__attribute__((target("avx2"))) void bf16Avx2(void* dstv, const void* av, const void* bv,
                                              size_t count) {
  uint16_t* dst = static_cast<uint16_t*>(dstv);
  const uint16_t* a = static_cast<const uint16_t*>(av);
  const uint16_t* b = static_cast<const uint16_t*>(bv);
  const __m256i zero = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i va = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i vb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i lo = bf16Round(
        apply8<Op>(_mm256_unpacklo_epi16(zero, va), _mm256_unpacklo_epi16(zero, vb)));
    const __m256i hi = bf16Round(
        apply8<Op>(_mm256_unpackhi_epi16(zero, va), _mm256_unpackhi_epi16(zero, vb)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_packus_epi32(lo, hi));
  }
  for (; i < count; ++i) dst[i] = Op::template apply<Bf16>(a[i], b[i]);
}
// Indexed by op like kRow. bf16 Max/Min keep the codec (g++ vectorises its shift well).
constexpr ReduceFn kHalfRow[4] = {&inPlace<&halfF16c<SumOp>>, &inPlace<&halfF16c<ProdOp>>,
                                  &inPlace<&halfF16c<MaxOp>>, &inPlace<&halfF16c<MinOp>>};
constexpr Reduce3Fn kHalfRow3[4] = {&halfF16c<SumOp>, &halfF16c<ProdOp>, &halfF16c<MaxOp>,
                                    &halfF16c<MinOp>};
constexpr ReduceFn kBf16Row[4] = {&inPlace<&bf16Avx2<SumOp>>, &inPlace<&bf16Avx2<ProdOp>>,
                                  &kernel<Bf16, MaxOp>, &kernel<Bf16, MinOp>};
constexpr Reduce3Fn kBf16Row3[4] = {&bf16Avx2<SumOp>, &bf16Avx2<ProdOp>, &kernel3<Bf16, MaxOp>,
                                    &kernel3<Bf16, MinOp>};
#endif

// Rounds a double to fp32 with round-to-odd: the result is the nearest float toward zero with its
// lsb forced to 1 when inexact. Rounding that once more, to nearest even, into a format with at most
// 22 mantissa bits gives the same result as rounding the double directly (Boldo and Melquiond).
inline float toFloatRoundOdd(double d) {
  float f = static_cast<float>(d);
  uint32_t b = bitsOf(f);
  bool inexact = static_cast<double>(f) != d && d == d;
  bool even = (b & 1u) == 0;
  bool away = std::fabs(static_cast<double>(f)) > std::fabs(d);  // rounded away from zero
  b += (inexact && even) ? (away ? ~0u : 1u) : 0u;
  return floatOf(b);
}

template <class C>
void divideSmall(void* data, size_t count, int n) {
  using S = typename C::Storage;
  S* __restrict p = static_cast<S*>(data);
  double dn = n;
  for (size_t i = 0; i < count; ++i) {
    p[i] = C::encode(toFloatRoundOdd(static_cast<double>(C::decode(p[i])) / dn));
  }
}

template <typename T>
void divideInt(void* data, size_t count, int n) {
  T* __restrict p = static_cast<T*>(data);
  // n > 0 fits every type except int8/uint8 beyond 127/255, where every quotient is 0 (or -0).
  using W = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
  W dn = static_cast<W>(n);
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<T>(static_cast<W>(p[i]) / dn);
}

template <typename T>
T saturatingFromDouble(double v) {
  if (v != v) return 0;
  double t = std::trunc(v);
  if (t <= static_cast<double>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
  // max() may round up when converted (2^63 - 1 -> 2^63), so compare with >=.
  if (t >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return static_cast<T>(t);
}

/// The CPU runs the x86-64-v3 (AVX2, F16C) code below.
bool hasV3() {
#if NLCCL_X86_CLONES
  static const bool v3 = __builtin_cpu_supports("x86-64-v3");
  return v3;
#else
  return false;
#endif
}

#if NLCCL_X86_CLONES
// x / n for fp16 and bf16, 8 and 16 lanes at a time: the quotient in fp32, then rounded to the
// format, is x / n rounded once (a second rounding is innocuous when the first format carries at
// least 2p + 2 bits: 24 >= 2 * 11 + 2 and 2 * 8 + 2; Figueroa) as long as the fp32 quotient is
// normal, and n is exact in fp32 (n < 2^24; divideByCount checks). fp16 values over such n always
// are. A bf16 quotient may be subnormal, where fp32 keeps only 16 bits below bf16's last, too few
// once n passes 2^16 (2^-117 / 131071 would round to 0, not to the smallest subnormal): a vector
// holding a nonzero magnitude under 2^-100 goes to divideSmall. NaN stays NaN (payload aside),
// as in divideSmall.
__attribute__((target("avx2,f16c"))) void divideHalfF16c(void* data, size_t count, int n) {
  uint16_t* p = static_cast<uint16_t*>(data);
  const __m256 dn = _mm256_set1_ps(static_cast<float>(n));
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m128i* at = reinterpret_cast<__m128i*>(p + i);
    const __m256 q = _mm256_div_ps(_mm256_cvtph_ps(_mm_loadu_si128(at)), dn);
    _mm_storeu_si128(at, _mm256_cvtps_ph(q, _MM_FROUND_CUR_DIRECTION));
  }
  divideSmall<Half>(p + i, count - i, n);
}

// Per fp32 lane: nonzero and under 2^-100 in magnitude.
__attribute__((target("avx2"))) inline __m256i subnormalRisk(__m256i x) {
  const __m256i a = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
  return _mm256_andnot_si256(_mm256_cmpeq_epi32(a, _mm256_setzero_si256()),
                             _mm256_cmpgt_epi32(_mm256_set1_epi32(27 << 23), a));
}

__attribute__((target("avx2"))) void divideBf16Avx2(void* data, size_t count, int n) {
  uint16_t* p = static_cast<uint16_t*>(data);
  const __m256 dn = _mm256_set1_ps(static_cast<float>(n));
  const __m256i zero = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m256i* at = reinterpret_cast<__m256i*>(p + i);
    const __m256i v = _mm256_loadu_si256(at);
    const __m256i lo = _mm256_unpacklo_epi16(zero, v), hi = _mm256_unpackhi_epi16(zero, v);
    if (!_mm256_testz_si256(_mm256_or_si256(subnormalRisk(lo), subnormalRisk(hi)),
                            _mm256_set1_epi32(-1))) {
      divideSmall<Bf16>(p + i, 16, n);
      continue;
    }
    const __m256i rl = bf16Round(_mm256_div_ps(_mm256_castsi256_ps(lo), dn));
    const __m256i rh = bf16Round(_mm256_div_ps(_mm256_castsi256_ps(hi), dn));
    _mm256_storeu_si256(at, _mm256_packus_epi32(rl, rh));
  }
  divideSmall<Bf16>(p + i, count - i, n);
}
#endif

// The entry for (type, op) in `table`, or null for invalid enums; on x86-64-v3 CPUs Float16 and
// Bfloat16 take `fastHalf`'s and `fastBf16`'s rows (hand-vectorised) instead.
template <class Fn>
Fn lookup(const Fn* const (&table)[kNumDataTypes], const Fn* fastHalf, const Fn* fastBf16,
          DataType type, RedOp op) {
  int t = static_cast<int>(type);
  int o = static_cast<int>(op == RedOp::Avg ? RedOp::Sum : op);
  if (t < 0 || t >= kNumDataTypes || o < 0 || o >= 4) return nullptr;
  const bool v3 = hasV3();
  if (v3 && type == DataType::Float16) return fastHalf[o];
  if (v3 && type == DataType::Bfloat16) return fastBf16[o];
  return table[t][o];
}

}  // namespace

#if NLCCL_X86_CLONES
ReduceFn reduceKernel(DataType type, RedOp op) {
  return lookup(kKernels, kHalfRow, kBf16Row, type, op);
}
Reduce3Fn reduce3Kernel(DataType type, RedOp op) {
  return lookup(kKernels3, kHalfRow3, kBf16Row3, type, op);
}
#else
ReduceFn reduceKernel(DataType type, RedOp op) {
  return lookup<ReduceFn>(kKernels, nullptr, nullptr, type, op);
}
Reduce3Fn reduce3Kernel(DataType type, RedOp op) {
  return lookup<Reduce3Fn>(kKernels3, nullptr, nullptr, type, op);
}
#endif

void divideByCount(DataType type, void* data, size_t count, int n) {
  if (n <= 1 || count == 0) return;
  switch (type) {
    case DataType::Int8: return divideInt<int8_t>(data, count, n);
    case DataType::Uint8: return divideInt<uint8_t>(data, count, n);
    case DataType::Int32: return divideInt<int32_t>(data, count, n);
    case DataType::Uint32: return divideInt<uint32_t>(data, count, n);
    case DataType::Int64: return divideInt<int64_t>(data, count, n);
    case DataType::Uint64: return divideInt<uint64_t>(data, count, n);
#if NLCCL_X86_CLONES
    case DataType::Float16:  // (the vector paths need n exact in fp32)
      return hasV3() && n < (1 << 24) ? divideHalfF16c(data, count, n)
                                      : divideSmall<Half>(data, count, n);
    case DataType::Bfloat16:
      return hasV3() && n < (1 << 24) ? divideBf16Avx2(data, count, n)
                                      : divideSmall<Bf16>(data, count, n);
#else
    case DataType::Float16: return divideSmall<Half>(data, count, n);
    case DataType::Bfloat16: return divideSmall<Bf16>(data, count, n);
#endif
    case DataType::Float8e4m3: return divideSmall<E4m3>(data, count, n);
    case DataType::Float8e5m2: return divideSmall<E5m2>(data, count, n);
    case DataType::Float32: {
      float* __restrict p = static_cast<float*>(data);
      if (n < (1 << 24)) {  // n exact in fp32: IEEE division rounds x/n once, 8 lanes at a time
        const float fn = static_cast<float>(n);
        for (size_t i = 0; i < count; ++i) p[i] = p[i] / fn;
        return;
      }
      // The double quotient is within 2^-53 relative of x/n, far closer than any float rounding
      // boundary it could cross for n < 2^28, so rounding it to float rounds x/n once.
      double dn = n;
      for (size_t i = 0; i < count; ++i) p[i] = static_cast<float>(p[i] / dn);
      return;
    }
    case DataType::Float64: {
      double* __restrict p = static_cast<double*>(data);
      double dn = n;
      for (size_t i = 0; i < count; ++i) p[i] = p[i] / dn;
      return;
    }
  }
}

float halfToFloat(uint16_t h) { return Half::decode(h); }
uint16_t floatToHalf(float f) { return Half::encode(f); }
float bf16ToFloat(uint16_t b) { return Bf16::decode(b); }
uint16_t floatToBf16(float f) { return Bf16::encode(f); }
float fp8e4m3ToFloat(uint8_t v) { return E4m3::decode(v); }
uint8_t floatToFp8e4m3(float f) { return E4m3::encode(f); }
float fp8e5m2ToFloat(uint8_t v) { return E5m2::decode(v); }
uint8_t floatToFp8e5m2(float f) { return E5m2::encode(f); }

double loadAsDouble(DataType type, const void* buf, size_t i) {
  switch (type) {
    case DataType::Int8: return static_cast<const int8_t*>(buf)[i];
    case DataType::Uint8: return static_cast<const uint8_t*>(buf)[i];
    case DataType::Int32: return static_cast<const int32_t*>(buf)[i];
    case DataType::Uint32: return static_cast<const uint32_t*>(buf)[i];
    case DataType::Int64: return static_cast<double>(static_cast<const int64_t*>(buf)[i]);
    case DataType::Uint64: return static_cast<double>(static_cast<const uint64_t*>(buf)[i]);
    case DataType::Float16: return Half::decode(static_cast<const uint16_t*>(buf)[i]);
    case DataType::Float32: return static_cast<const float*>(buf)[i];
    case DataType::Float64: return static_cast<const double*>(buf)[i];
    case DataType::Bfloat16: return Bf16::decode(static_cast<const uint16_t*>(buf)[i]);
    case DataType::Float8e4m3: return E4m3::decode(static_cast<const uint8_t*>(buf)[i]);
    case DataType::Float8e5m2: return E5m2::decode(static_cast<const uint8_t*>(buf)[i]);
  }
  return 0.0;
}

void storeFromDouble(DataType type, void* buf, size_t i, double v) {
  switch (type) {
    case DataType::Int8: static_cast<int8_t*>(buf)[i] = saturatingFromDouble<int8_t>(v); return;
    case DataType::Uint8: static_cast<uint8_t*>(buf)[i] = saturatingFromDouble<uint8_t>(v); return;
    case DataType::Int32: static_cast<int32_t*>(buf)[i] = saturatingFromDouble<int32_t>(v); return;
    case DataType::Uint32:
      static_cast<uint32_t*>(buf)[i] = saturatingFromDouble<uint32_t>(v);
      return;
    case DataType::Int64: static_cast<int64_t*>(buf)[i] = saturatingFromDouble<int64_t>(v); return;
    case DataType::Uint64:
      static_cast<uint64_t*>(buf)[i] = saturatingFromDouble<uint64_t>(v);
      return;
    case DataType::Float16:
      static_cast<uint16_t*>(buf)[i] = Half::encode(toFloatRoundOdd(v));
      return;
    case DataType::Float32: static_cast<float*>(buf)[i] = static_cast<float>(v); return;
    case DataType::Float64: static_cast<double*>(buf)[i] = v; return;
    case DataType::Bfloat16:
      static_cast<uint16_t*>(buf)[i] = Bf16::encode(toFloatRoundOdd(v));
      return;
    case DataType::Float8e4m3:
      static_cast<uint8_t*>(buf)[i] = E4m3::encode(toFloatRoundOdd(v));
      return;
    case DataType::Float8e5m2:
      static_cast<uint8_t*>(buf)[i] = E5m2::encode(toFloatRoundOdd(v));
      return;
  }
}

}  // namespace nlccl::kernels

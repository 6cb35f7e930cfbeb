// Reduction kernels and small-float conversions against references written from first principles:
// formats are decoded from their definition (sign, exponent, mantissa), and rounding picks the
// nearest of the enumerated representable values (ties to the even encoding).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/reduce.hpp"

namespace nlccl::kernels {
namespace {

// ---- reference model of the small formats ----

struct Format {
  const char* name;
  int exp;
  int man;
  bool ieee;  // all-ones exponent is Inf/NaN; otherwise OCP E4M3 (only S.1111.111 is NaN)
  float (*toFloat)(uint32_t);
  uint32_t (*fromFloat)(float);
  DataType type;

  int bias() const { return (1 << (exp - 1)) - 1; }
  uint32_t signBit() const { return 1u << (exp + man); }
  uint32_t infCode() const { return ((1u << exp) - 1) << man; }
  uint32_t maxCode() const { return ieee ? infCode() - 1 : signBit() - 2; }
  int bits() const { return exp + man + 1; }
};

const Format kHalf{"fp16", 5, 10, true, [](uint32_t v) { return halfToFloat(uint16_t(v)); },
                   [](float f) -> uint32_t { return floatToHalf(f); }, DataType::Float16};
const Format kBf16{"bf16", 8, 7, true, [](uint32_t v) { return bf16ToFloat(uint16_t(v)); },
                   [](float f) -> uint32_t { return floatToBf16(f); }, DataType::Bfloat16};
const Format kE4m3{"e4m3", 4, 3, false, [](uint32_t v) { return fp8e4m3ToFloat(uint8_t(v)); },
                   [](float f) -> uint32_t { return floatToFp8e4m3(f); }, DataType::Float8e4m3};
const Format kE5m2{"e5m2", 5, 2, true, [](uint32_t v) { return fp8e5m2ToFloat(uint8_t(v)); },
                   [](float f) -> uint32_t { return floatToFp8e5m2(f); }, DataType::Float8e5m2};
const Format* const kFormats[] = {&kHalf, &kBf16, &kE4m3, &kE5m2};

// The value of an encoding, from the definition of the format.
double refDecode(const Format& f, uint32_t v) {
  bool neg = (v & f.signBit()) != 0;
  uint32_t e = (v >> f.man) & ((1u << f.exp) - 1);
  uint32_t m = v & ((1u << f.man) - 1);
  double r;
  if (f.ieee && e == (1u << f.exp) - 1) {
    r = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieee && (v & (f.signBit() - 1)) == f.signBit() - 1) {
    r = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    r = std::ldexp(double(m), 1 - f.bias() - f.man);
  } else {
    r = std::ldexp(double(m + (1u << f.man)), int(e) - f.bias() - f.man);
  }
  return neg ? -r : r;
}

// Round-to-nearest-even by enumeration of the representable values.
class RefRounder {
 public:
  explicit RefRounder(const Format& f) : f_(f) {
    for (uint32_t c = 0; c <= f.maxCode(); ++c) pos_.push_back(refDecode(f, c));
  }
  // Encoding nearest to x (ties to the even encoding). NaN gives the canonical NaN.
  uint32_t round(double x) const {
    uint32_t sign = std::signbit(x) ? f_.signBit() : 0;
    if (std::isnan(x)) return f_.ieee ? f_.infCode() | (1u << (f_.man - 1)) : f_.signBit() - 1;
    double a = std::fabs(x);
    double top = pos_.back();
    if (a > top) {
      if (!f_.ieee) return sign | f_.maxCode();  // satfinite
      // The first value past the largest finite is 2^(emax+1); the midpoint and above go to Inf.
      double next = top + (top - pos_[pos_.size() - 2]);
      return sign | (a >= (top + next) / 2 ? f_.infCode() : f_.maxCode());
    }
    size_t hi = std::upper_bound(pos_.begin(), pos_.end(), a) - pos_.begin();
    size_t lo = hi - 1;
    if (pos_[lo] == a) return sign | uint32_t(lo);
    double mid = (pos_[lo] + pos_[hi]) / 2;  // exact: the formats are far narrower than double
    size_t pickIdx = a < mid ? lo : a > mid ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | uint32_t(pickIdx);
  }
  const std::vector<double>& values() const { return pos_; }

 private:
  const Format& f_;
  std::vector<double> pos_;
};

const RefRounder& rounderFor(const Format& f) {
  static const RefRounder rounders[] = {RefRounder(kHalf), RefRounder(kBf16), RefRounder(kE4m3),
                                        RefRounder(kE5m2)};
  for (size_t i = 0; i < 4; ++i) {
    if (kFormats[i] == &f) return rounders[i];
  }
  std::abort();
}

bool isNanCode(const Format& f, uint32_t v) { return std::isnan(refDecode(f, v)); }

// ---- conversions ----

TEST(Conversions, EveryEncodingRoundTrips) {
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    int bad = 0;
    for (uint32_t v = 0; v < (1u << f->bits()); ++v) {
      double want = refDecode(*f, v);
      float got = f->toFloat(v);
      uint32_t back = f->fromFloat(got);
      if (std::isnan(want)) {
        bad += !std::isnan(got) || !isNanCode(*f, back) ||
               std::signbit(got) != std::signbit(want) || (back & f->signBit()) != (v & f->signBit());
      } else {
        bad += double(got) != want || std::signbit(got) != std::signbit(want) || back != v;
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(Conversions, KnownValues) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // halfway to 2^16 rounds to even = Inf
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to even (zero)
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(std::nanf("")))));

  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16ToFloat(0x7f7f), std::bit_cast<float>(0x7f7f0000u));
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf16ToFloat(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(floatToBf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, odd rounds up

  EXPECT_EQ(floatToFp8e4m3(1.0f), 0x38);
  EXPECT_EQ(fp8e4m3ToFloat(0x7e), 448.0f);
  EXPECT_EQ(fp8e4m3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(floatToFp8e4m3(464.0f), 0x7e);  // saturates
  EXPECT_EQ(floatToFp8e4m3(1e30f), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(-1e30f), 0xfe);
  EXPECT_EQ(floatToFp8e4m3(std::numeric_limits<float>::infinity()), 0x7e);
  EXPECT_EQ(floatToFp8e4m3(std::nanf("")), 0x7f);
  EXPECT_TRUE(std::isnan(fp8e4m3ToFloat(0xff)));
  EXPECT_EQ(fp8e4m3ToFloat(0x7d), 416.0f);  // S.1111.xxx other than 111 are finite

  EXPECT_EQ(floatToFp8e5m2(1.0f), 0x3c);
  EXPECT_EQ(fp8e5m2ToFloat(0x7b), 57344.0f);
  EXPECT_EQ(fp8e5m2ToFloat(0x01), std::ldexp(1.0f, -16));
  EXPECT_EQ(floatToFp8e5m2(61440.0f), 0x7c);  // halfway past the max rounds to Inf
  EXPECT_EQ(floatToFp8e5m2(61439.0f), 0x7b);
  EXPECT_EQ(floatToFp8e5m2(1e30f), 0x7c);
  EXPECT_EQ(floatToFp8e5m2(-std::numeric_limits<float>::infinity()), 0xfc);
  EXPECT_TRUE(std::isnan(fp8e5m2ToFloat(floatToFp8e5m2(std::nanf("")))));
}

// Every midpoint between neighbours (and one float ulp either side) plus many random floats.
TEST(Conversions, RoundsToNearestEvenLikeReference) {
  std::mt19937 rng(1234);
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    RefRounder ref(*f);
    std::vector<float> probes;
    const auto& vals = ref.values();
    for (size_t i = 0; i + 1 < vals.size(); ++i) {
      float mid = float((vals[i] + vals[i + 1]) / 2);
      ASSERT_EQ(double(mid), (vals[i] + vals[i + 1]) / 2);  // midpoints are exact in fp32
      for (float p : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e38f), float(vals[i])}) {
        probes.push_back(p);
        probes.push_back(-p);
      }
    }
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int i = 0; i < 200000; ++i) {
      probes.push_back(std::bit_cast<float>(uint32_t(rng())));           // any fp32, specials too
      probes.push_back(float(u(rng) * vals.back() * 1.1));               // within the range
      probes.push_back(float(u(rng) * vals[1u << f->man] * 2));          // around the subnormals
    }
    int bad = 0;
    for (float p : probes) {
      uint32_t got = f->fromFloat(p);
      uint32_t want = ref.round(p);
      bool ok = std::isnan(p) ? isNanCode(*f, got) : got == want;
      if (!ok && ++bad < 5) ADD_FAILURE() << "x=" << p << " got " << got << " want " << want;
    }
    EXPECT_EQ(bad, 0);
  }
}

// storeFromDouble must round a double once, even when a double -> float step would land on a
// midpoint (the double lies just off it).
TEST(Conversions, StoreFromDoubleRoundsOnce) {
  std::mt19937_64 rng(99);
  for (const Format* f : kFormats) {
    SCOPED_TRACE(f->name);
    RefRounder ref(*f);
    const auto& vals = ref.values();
    std::vector<double> probes;
    for (size_t i = 0; i + 1 < vals.size(); ++i) {
      double mid = (vals[i] + vals[i + 1]) / 2;
      for (double d : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e300), vals[i]}) {
        probes.push_back(d);
        probes.push_back(-d);
      }
    }
    for (int i = 0; i < 100000; ++i) probes.push_back(std::bit_cast<double>(uint64_t(rng())));
    int bad = 0;
    for (double d : probes) {
      uint32_t got = 0;
      storeFromDouble(f->type, &got, 0, d);  // little-endian: low bytes hold the element
      got &= (1u << f->bits()) - 1;
      bool ok = std::isnan(d) ? isNanCode(*f, got) : got == ref.round(d);
      if (!ok && ++bad < 5) ADD_FAILURE() << "x=" << d << " got " << got;
      if (!std::isnan(d)) {
        EXPECT_EQ(loadAsDouble(f->type, &got, 0), refDecode(*f, got));
      }
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST(Conversions, IntegerLoadStore) {
  int8_t i8 = 0;
  storeFromDouble(DataType::Int8, &i8, 0, -3.9);
  EXPECT_EQ(i8, -3);
  storeFromDouble(DataType::Int8, &i8, 0, 1000);
  EXPECT_EQ(i8, 127);
  uint64_t u64 = 0;
  storeFromDouble(DataType::Uint64, &u64, 0, 1e30);
  EXPECT_EQ(u64, std::numeric_limits<uint64_t>::max());
  storeFromDouble(DataType::Uint64, &u64, 0, -5);
  EXPECT_EQ(u64, 0u);
  int32_t i32 = -123456;
  EXPECT_EQ(loadAsDouble(DataType::Int32, &i32, 0), -123456.0);
}

// ---- kernels ----

constexpr DataType kAllTypes[] = {
    DataType::Int8,    DataType::Uint8,   DataType::Int32,    DataType::Uint32,
    DataType::Int64,   DataType::Uint64,  DataType::Float16,  DataType::Float32,
    DataType::Float64, DataType::Bfloat16, DataType::Float8e4m3, DataType::Float8e5m2};
constexpr RedOp kAllOps[] = {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min, RedOp::Avg};

const Format* formatOf(DataType t) {
  for (const Format* f : kFormats) {
    if (f->type == t) return f;
  }
  return nullptr;
}

uint64_t rawAt(DataType t, const std::vector<uint8_t>& buf, size_t i) {
  uint64_t v = 0;
  std::memcpy(&v, buf.data() + i * dataTypeSize(t), dataTypeSize(t));
  return v;
}

// Sign-extends an integer element to int64 (unsigned types: zero-extends).
int64_t intValue(DataType t, uint64_t raw) {
  int bits = int(dataTypeSize(t)) * 8;
  bool isSigned = t == DataType::Int8 || t == DataType::Int32 || t == DataType::Int64;
  if (!isSigned || bits == 64) return int64_t(raw);
  return int64_t(raw << (64 - bits)) >> (64 - bits);
}

double floatValue(DataType t, uint64_t raw) {
  if (t == DataType::Float32) return std::bit_cast<float>(uint32_t(raw));
  if (t == DataType::Float64) return std::bit_cast<double>(raw);
  return refDecode(*formatOf(t), uint32_t(raw));
}

// The expected raw result of a op b, computed independently of the library.
// For Max/Min *valueOnly is set: a tie between +0 and -0 may return either.
uint64_t expected(DataType t, RedOp op, uint64_t a, uint64_t b, bool* valueOnly) {
  *valueOnly = false;
  uint64_t mask = dataTypeSize(t) == 8 ? ~0ull : (1ull << (8 * dataTypeSize(t))) - 1;
  bool isUnsigned = t == DataType::Uint8 || t == DataType::Uint32 || t == DataType::Uint64;
  if (!isFloating(t)) {
    int64_t x = intValue(t, a), y = intValue(t, b);
    switch (op) {
      case RedOp::Sum:
      case RedOp::Avg: return (a + b) & mask;  // modulo 2^n
      case RedOp::Prod: return (a * b) & mask;
      case RedOp::Max: return isUnsigned ? std::max(a, b) : (x >= y ? a : b);
      case RedOp::Min: return isUnsigned ? std::min(a, b) : (x <= y ? a : b);
    }
  }
  double x = floatValue(t, a), y = floatValue(t, b);
  double r = 0;
  switch (op) {
    case RedOp::Sum:
    case RedOp::Avg: r = x + y; break;
    case RedOp::Prod: r = x * y; break;
    case RedOp::Max:
    case RedOp::Min:
      *valueOnly = true;
      if (std::isnan(x) || std::isnan(y)) r = std::numeric_limits<double>::quiet_NaN();
      else r = op == RedOp::Max ? std::max(x, y) : std::min(x, y);
      break;
  }
  // One rounding of the exact result. r itself is rounded in double, but double holds more than
  // twice the precision (plus two bits) of every storage type, so that cannot change the result.
  if (t == DataType::Float64) return std::bit_cast<uint64_t>(r);
  if (t == DataType::Float32) return std::bit_cast<uint32_t>(float(r));
  return rounderFor(*formatOf(t)).round(r);
}

std::vector<uint8_t> randomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

// Random elements: for fp32/fp64 either any bit pattern or moderate values (so that Sum and Prod
// are not dominated by overflow); the narrow types take every bit pattern.
std::vector<uint8_t> randomData(std::mt19937_64& rng, DataType t, size_t count, bool moderate) {
  std::vector<uint8_t> v = randomBytes(rng, count * dataTypeSize(t));
  if (moderate && (t == DataType::Float32 || t == DataType::Float64)) {
    std::uniform_real_distribution<double> u(-100.0, 100.0);
    for (size_t i = 0; i < count; ++i) storeFromDouble(t, v.data(), i, u(rng));
  }
  return v;
}

void checkKernel(DataType t, RedOp op, const std::vector<uint8_t>& dst0,
                 const std::vector<uint8_t>& src, size_t count) {
  std::vector<uint8_t> dst = dst0;
  ReduceFn fn = reduceKernel(t, op);
  ASSERT_NE(fn, nullptr);
  fn(dst.data(), src.data(), count);
  int bad = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t a = rawAt(t, dst0, i), b = rawAt(t, src, i), got = rawAt(t, dst, i);
    bool valueOnly;
    uint64_t want = expected(t, op, a, b, &valueOnly);
    bool ok;
    if (isFloating(t) && std::isnan(floatValue(t, want))) {
      ok = std::isnan(floatValue(t, got));
    } else if (valueOnly) {
      ok = floatValue(t, got) == floatValue(t, want);
    } else {
      ok = got == want;
    }
    if (!ok && ++bad <= 3) {
      ADD_FAILURE() << dataTypeName(t) << " " << redOpName(op) << " i=" << i << " a=" << a
                    << " b=" << b << " got=" << got << " want=" << want;
    }
  }
  EXPECT_EQ(bad, 0);
}

class KernelTest : public ::testing::TestWithParam<DataType> {};

TEST_P(KernelTest, EveryOpMatchesReference) {
  DataType t = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
  for (RedOp op : kAllOps) {
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1000), size_t(4099)}) {
      for (bool moderate : {false, true}) {
        SCOPED_TRACE(testing::Message() << redOpName(op) << " count=" << count);
        checkKernel(t, op, randomData(rng, t, count, moderate), randomData(rng, t, count, moderate),
                    count);
      }
    }
  }
}

// The kernels must not care about alignment: run on buffers offset by one element.
TEST_P(KernelTest, UnalignedBuffers) {
  DataType t = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(t) + 5);
  size_t count = 1001, es = dataTypeSize(t);
  auto dst0 = randomData(rng, t, count + 1, true), src = randomData(rng, t, count + 1, true);
  for (RedOp op : {RedOp::Sum, RedOp::Max}) {
    std::vector<uint8_t> dst = dst0;
    reduceKernel(t, op)(dst.data() + es, src.data() + es, count);
    std::vector<uint8_t> want(dst0.begin() + es, dst0.end());
    reduceKernel(t, op)(want.data(), std::vector<uint8_t>(src.begin() + es, src.end()).data(),
                        count);
    EXPECT_EQ(0, std::memcmp(dst.data() + es, want.data(), count * es));
    EXPECT_EQ(0, std::memcmp(dst.data(), dst0.data(), es));  // element before untouched
  }
}

// The out-of-place kernel, dst = a op b, equals copying a into dst and reducing b into it, bit for
// bit, whatever dst held before: at odd lengths, across vector widths, unaligned; reduceCopy with
// dst aliasing src is the in-place kernel.
TEST_P(KernelTest, OutOfPlaceKernelEqualsCopyThenReduce) {
  DataType t = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(t) * 31 + 3);
  const size_t es = dataTypeSize(t);
  for (RedOp op : kAllOps) {
    ReduceFn fn = reduceKernel(t, op);
    Reduce3Fn fn3 = reduce3Kernel(t, op);
    ASSERT_NE(fn3, nullptr);
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(63), size_t(64), size_t(65),
                         size_t(4099)}) {
      SCOPED_TRACE(testing::Message() << redOpName(op) << " count=" << count);
      // One extra element in front, so the second pass runs on unaligned pointers.
      auto src = randomData(rng, t, count + 1, true), in = randomData(rng, t, count + 1, true);
      auto garbage = randomData(rng, t, count + 2, false);
      for (size_t skew : {size_t(0), es}) {
        const size_t n = count + 1 - skew / es;  // elements from the skew on
        std::vector<uint8_t> want(src.begin() + skew, src.end());
        fn(want.data(), in.data() + skew, n);
        std::vector<uint8_t> dst = garbage;
        reduceCopy(fn, fn3, dst.data() + skew, src.data() + skew, in.data() + skew, n);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), dst.begin() + skew)) << "skew " << skew;
        EXPECT_EQ(0, std::memcmp(dst.data(), garbage.data(), skew));  // nothing before dst
        EXPECT_EQ(0, std::memcmp(dst.data() + skew + n * es, garbage.data() + skew + n * es,
                                 garbage.size() - skew - n * es));  // nor after it
        std::vector<uint8_t> alias = src;  // dst == src: a plain reduce
        reduceCopy(fn, fn3, alias.data() + skew, alias.data() + skew, in.data() + skew, n);
        EXPECT_TRUE(std::equal(want.begin(), want.end(), alias.begin() + skew)) << "aliased";
      }
      std::vector<uint8_t> untouched = garbage;  // count 0 writes nothing
      reduceCopy(fn, fn3, untouched.data(), src.data(), in.data(), 0);
      EXPECT_EQ(untouched, garbage);
    }
  }
}

// A kernel's vector loop gives the bits its scalar codec gives: one call over many elements
// against one call per element (which never reaches a vector loop). Which of two NaN operands
// survives is the compiler's choice (it may swap a commutative op's operands; g++ does in the
// fp8 e5m2 loop), so a NaN need only be a NaN there.
TEST_P(KernelTest, VectorLoopsMatchTheScalarCodecBitForBit) {
  DataType t = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(t) * 7 + 11);
  const size_t count = 4096;
  for (RedOp op : kAllOps) {
    SCOPED_TRACE(redOpName(op));
    ReduceFn fn = reduceKernel(t, op);
    Reduce3Fn fn3 = reduce3Kernel(t, op);
    const size_t es = dataTypeSize(t);
    auto a = randomData(rng, t, count, false), b = randomData(rng, t, count, false);
    if (isFloating(t)) {  // signed zeros compare equal, so Max/Min must keep the first
      storeFromDouble(t, a.data(), 0, 0.0);
      storeFromDouble(t, b.data(), 0, -0.0);
      storeFromDouble(t, a.data(), 1, -0.0);
      storeFromDouble(t, b.data(), 1, 0.0);
    }
    std::vector<uint8_t> whole = a, three(a.size()), each = a;
    fn(whole.data(), b.data(), count);
    fn3(three.data(), a.data(), b.data(), count);
    for (size_t i = 0; i < count; ++i) fn(each.data() + i * es, b.data() + i * es, 1);
    int bad = 0;
    for (size_t i = 0; i < count && bad < 3; ++i) {
      const uint64_t want = rawAt(t, each, i);
      for (const auto* got : {&whole, &three}) {
        const uint64_t g = rawAt(t, *got, i);
        const bool nan = isFloating(t) && std::isnan(floatValue(t, want));
        if (nan ? !std::isnan(floatValue(t, g)) : g != want) {
          ADD_FAILURE() << "element " << i << ": a " << rawAt(t, a, i) << " b " << rawAt(t, b, i)
                        << ": got " << g << (got == &three ? " out of place" : "")
                        << ", per element " << want;
          ++bad;
        }
      }
    }
  }
}

TEST_P(KernelTest, DivideByCount) {
  DataType t = GetParam();
  std::mt19937_64 rng(static_cast<uint64_t>(t) + 77);
  size_t count = 1003;
  // 2^24 + 1 ranks: no longer exact in fp32, where fp32 and fp16/bf16 divide on x86.
  for (int n : {1, 2, 3, 7, 8, 1000, (1 << 24) + 1}) {
    for (bool moderate : {false, true}) {
      auto data0 = randomData(rng, t, count, moderate);
      auto data = data0;
      divideByCount(t, data.data(), count, n);
      int bad = 0;
      for (size_t i = 0; i < count; ++i) {
        uint64_t a = rawAt(t, data0, i), got = rawAt(t, data, i), want;
        if (!isFloating(t)) {
          bool isUnsigned = t == DataType::Uint8 || t == DataType::Uint32 || t == DataType::Uint64;
          uint64_t mask = dataTypeSize(t) == 8 ? ~0ull : (1ull << (8 * dataTypeSize(t))) - 1;
          want = isUnsigned ? a / uint64_t(n) : uint64_t(intValue(t, a) / int64_t(n)) & mask;
        } else {
          double q = floatValue(t, a) / n;  // one double rounding; cannot move the final rounding
          if (t == DataType::Float64) want = std::bit_cast<uint64_t>(q);
          else if (t == DataType::Float32) want = std::bit_cast<uint32_t>(float(q));
          else want = rounderFor(*formatOf(t)).round(q);
        }
        bool ok = isFloating(t) && std::isnan(floatValue(t, a)) ? std::isnan(floatValue(t, got))
                                                               : got == want;
        if (!ok && ++bad <= 3) ADD_FAILURE() << "n=" << n << " a=" << a << " got=" << got;
      }
      EXPECT_EQ(bad, 0) << "n=" << n;
    }
  }
}

// Rounding x / n in fp32 first and then to bf16 is rounding once, except where the fp32 quotient
// is subnormal and n is large: 2^-117 / 131071 lies just above half the smallest bf16 subnormal,
// but in fp32 it rounds to exactly that half, which then rounds to 0. The result must be the
// subnormal, on the vector path as on the scalar one.
TEST(DivideByCount, Bf16QuotientsRoundOnceAtManyRanks) {
  const uint16_t x = 10 << 7;  // 2^-117: biased exponent 127 - 117
  std::vector<uint16_t> data(37, x);
  divideByCount(DataType::Bfloat16, data.data(), data.size(), 131071);
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(data[i], 0x0001) << "element " << i;
}


INSTANTIATE_TEST_SUITE_P(AllTypes, KernelTest, ::testing::ValuesIn(kAllTypes),
                         [](const testing::TestParamInfo<DataType>& info) {
                           return std::string(dataTypeName(info.param));
                         });

// fp8 is small enough to check every pair of operands for every op.
TEST(Kernels, Fp8AllPairs) {
  for (DataType t : {DataType::Float8e4m3, DataType::Float8e5m2}) {
    std::vector<uint8_t> dst, src;
    for (int a = 0; a < 256; ++a) {
      for (int b = 0; b < 256; ++b) {
        dst.push_back(uint8_t(a));
        src.push_back(uint8_t(b));
      }
    }
    for (RedOp op : {RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min}) {
      SCOPED_TRACE(testing::Message() << dataTypeName(t) << " " << redOpName(op));
      checkKernel(t, op, dst, src, dst.size());
    }
  }
}

TEST(Kernels, Table) {
  for (DataType t : kAllTypes) {
    for (RedOp op : kAllOps) EXPECT_NE(reduceKernel(t, op), nullptr);
    EXPECT_EQ(reduceKernel(t, RedOp::Avg), reduceKernel(t, RedOp::Sum));
  }
  EXPECT_EQ(reduceKernel(static_cast<DataType>(12), RedOp::Sum), nullptr);
  EXPECT_EQ(reduceKernel(DataType::Float32, static_cast<RedOp>(5)), nullptr);
}

}  // namespace
}  // namespace nlccl::kernels

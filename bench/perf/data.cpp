#include "data.hpp"
#include "moe_pattern.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace nlccl::perf {

namespace {

bool isFloat(nlcclDataType_t t) {
  return t == nlcclHalf || t == nlcclFloat || t == nlcclDouble || t == nlcclBfloat16 ||
         t == nlcclFloat8e4m3 || t == nlcclFloat8e5m2;
}

/// Largest integer up to which every integer is exact (sums stay below it).
int64_t exactLimit(nlcclDataType_t t) {
  switch (t) {
    case nlcclInt8: return 127;
    case nlcclUint8: return 255;
    case nlcclHalf: return 2048;
    case nlcclBfloat16: return 256;
    case nlcclFloat8e4m3: return 16;
    case nlcclFloat8e5m2: return 8;
    default: return int64_t{1} << 24;
  }
}

/// Largest k with 2^k exact and in range (products of 2s stay below it).
int pow2Limit(nlcclDataType_t t) {
  switch (t) {
    case nlcclInt8: return 6;
    case nlcclUint8: return 7;
    case nlcclInt32: return 30;
    case nlcclUint32: return 31;
    case nlcclInt64: return 62;
    case nlcclUint64: return 63;
    case nlcclHalf: return 15;
    case nlcclFloat8e4m3: return 8;
    case nlcclFloat8e5m2: return 15;
    default: return 126;
  }
}

/// Relative tolerance of one Avg rounding, and the smallest step near zero.
double relTol(nlcclDataType_t t) {
  switch (t) {
    case nlcclHalf: return 0x1p-10;
    case nlcclBfloat16: return 0x1p-7;
    case nlcclFloat8e4m3: return 0x1p-3;
    case nlcclFloat8e5m2: return 0x1p-2;
    case nlcclFloat: return 0x1p-22;
    case nlcclDouble: return 0x1p-50;
    default: return 0;
  }
}
double absTol(nlcclDataType_t t) {
  switch (t) {
    case nlcclHalf: return 0x1p-24;
    case nlcclFloat8e4m3: return 0x1p-9;
    case nlcclFloat8e5m2: return 0x1p-16;
    default: return 0;
  }
}

double halfToDouble(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY)
                                                   : std::ldexp(1024 + m, e - 25);
  return s ? -v : v;
}
double e4m3ToDouble(uint8_t b) {
  int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  double v = (e == 15 && m == 7) ? NAN : e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return s ? -v : v;
}
double e5m2ToDouble(uint8_t b) {
  int s = b >> 7, e = (b >> 2) & 31, m = b & 3;
  double v = e == 0 ? std::ldexp(m, -16) : e == 31 ? (m ? NAN : INFINITY)
                                                   : std::ldexp(4 + m, e - 17);
  return s ? -v : v;
}
double bf16ToDouble(uint16_t h) {
  uint32_t bits = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// The value of element at address p of type t, as a double.
inline double load(nlcclDataType_t t, const void* base, size_t i) {
  const auto* p = static_cast<const uint8_t*>(base);
  switch (t) {
    case nlcclInt8: return static_cast<const int8_t*>(base)[i];
    case nlcclUint8: return static_cast<const uint8_t*>(base)[i];
    case nlcclInt32: return static_cast<const int32_t*>(base)[i];
    case nlcclUint32: return static_cast<const uint32_t*>(base)[i];
    case nlcclInt64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case nlcclUint64: return static_cast<double>(static_cast<const uint64_t*>(base)[i]);
    case nlcclHalf: return halfToDouble(static_cast<const uint16_t*>(base)[i]);
    case nlcclFloat: return static_cast<const float*>(base)[i];
    case nlcclDouble: return static_cast<const double*>(base)[i];
    case nlcclBfloat16: return bf16ToDouble(static_cast<const uint16_t*>(base)[i]);
    case nlcclFloat8e4m3: return e4m3ToDouble(p[i]);
    case nlcclFloat8e5m2: return e5m2ToDouble(p[i]);
    default: return NAN;
  }
}

constexpr int kMaxValue = 100;

/// Bit patterns of the integers 0..kMaxValue in each type.
struct EncodeTable {
  uint64_t bits[nlcclNumTypes][kMaxValue + 1];
  EncodeTable() {
    for (int t = 0; t < nlcclNumTypes; ++t) {
      auto type = static_cast<nlcclDataType_t>(t);
      for (int k = 0; k <= kMaxValue; ++k) {
        uint64_t b = 0;
        if (!isFloat(type)) {
          b = static_cast<uint64_t>(k);
        } else if (type == nlcclFloat) {
          float f = static_cast<float>(k);
          uint32_t u;
          std::memcpy(&u, &f, 4);
          b = u;
        } else if (type == nlcclDouble) {
          double d = k;
          std::memcpy(&b, &d, 8);
        } else {
          // Narrow floats: find the exact code (the tables only hold exact integers).
          unsigned codes = (type == nlcclHalf || type == nlcclBfloat16) ? 0x8000 : 0x80;
          for (unsigned c = 0; c < codes; ++c) {
            uint16_t c16 = static_cast<uint16_t>(c);
            uint8_t c8 = static_cast<uint8_t>(c);
            double v = type == nlcclHalf        ? halfToDouble(c16)
                       : type == nlcclBfloat16  ? bf16ToDouble(c16)
                       : type == nlcclFloat8e4m3 ? e4m3ToDouble(c8)
                                                 : e5m2ToDouble(c8);
            if (v == k) {
              b = c;
              break;
            }
          }
        }
        bits[t][k] = b;
      }
    }
  }
};
const EncodeTable& encodeTable() {
  static const EncodeTable table;
  return table;
}

/// The largest mulsum scalar of a type (1 for fp8: their inputs leave no headroom).
int scalarMax(nlcclDataType_t t) { return t == nlcclFloat8e4m3 || t == nlcclFloat8e5m2 ? 1 : 2; }
int scalarOf(nlcclDataType_t t, int rank) { return scalarMax(t) > 1 ? 1 + rank % 2 : 1; }

/// How rank r's element i is generated for a case.
struct Gen {
  enum Kind { Plain, Sum, Prod } kind = Plain;
  uint64_t mod = 2;    // values 0..mod-1 (Plain, Sum)
  int active = 1;      // ranks with non-neutral values (Sum, Prod)

  Gen(const CheckCase& c) {
    bool reduces = collHasOp(c.coll);
    int64_t lim = exactLimit(c.type);
    if (reduces && c.op == kMulSum) lim = scalarMax(c.type) > 1 ? lim / 2 : lim;
    if (reduces && (c.op == nlcclSum || c.op == nlcclAvg || c.op == kMulSum)) {
      kind = Sum;
      if (c.nranks <= lim) {
        active = c.nranks;
        mod = static_cast<uint64_t>(std::min<int64_t>(lim / c.nranks, kMaxValue)) + 1;
      } else {
        active = static_cast<int>(lim);
        mod = 2;
      }
    } else if (reduces && c.op == nlcclProd) {
      kind = Prod;
      active = std::min(c.nranks, pow2Limit(c.type));
    } else {
      kind = Plain;
      mod = static_cast<uint64_t>(std::min<int64_t>(lim, kMaxValue)) + 1;
    }
  }
  /// The integer value of rank r's element i.
  int value(int r, size_t i) const {
    uint64_t x = i * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(r + 1) * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 32;
    switch (kind) {
      case Plain: return static_cast<int>(x % mod);
      case Sum: return r < active ? static_cast<int>(x % mod) : 0;
      default: return (r < active && (x & 1)) ? 2 : 1;
    }
  }
};

/// Expected reduction of element i over all ranks.
double reduceExpected(const CheckCase& c, const Gen& g, size_t i) {
  const bool mul = c.op == kMulSum;
  double acc = g.value(0, i) * (mul ? scalarOf(c.type, 0) : 1);
  for (int r = 1; r < c.nranks; ++r) {
    double v = g.value(r, i);
    if (mul) {
      acc += v * scalarOf(c.type, r);
      continue;
    }
    switch (c.op) {
      case nlcclSum: case nlcclAvg: acc += v; break;
      case nlcclProd: acc *= v; break;
      case nlcclMax: acc = std::max(acc, v); break;
      case nlcclMin: acc = std::min(acc, v); break;
      default: break;
    }
  }
  if (c.op == nlcclAvg) acc = isFloat(c.type) ? acc / c.nranks : std::trunc(acc / c.nranks);
  return acc;
}

}  // namespace

size_t a2avCount(int from, int to, size_t per, int n) {
  if (moeActive()) return moeCount(from, to, per, n);  // --moe: the routing generator's counts
  const int k = ((to - from) % n + n) % n;  // a Latin square: rows and columns sum alike
  if (n % 2 == 1 && k == n - 1) return per;
  const size_t small = per / 2;
  return k % 2 == 0 ? 2 * per - small : small;
}
size_t a2avSendDispl(int from, int to, size_t per, int n) {
  size_t at = 0;
  for (int j = 0; j < to; ++j) at += a2avCount(from, j, per, n);
  return at;
}
size_t a2avRecvDispl(int from, int to, size_t per, int n) {
  size_t at = 0;
  for (int i = 0; i < from; ++i) at += a2avCount(i, to, per, n);
  return at;
}

void mulsumScalar(nlcclDataType_t type, int rank, void* out) {
  const int s = scalarOf(type, rank);
  std::memcpy(out, &encodeTable().bits[type][s], typeSize(type));
}

Counts collCounts(Coll c, size_t count, int n) {
  Counts k;
  size_t per = count / static_cast<size_t>(n);
  switch (c) {
    case Coll::AllGather:
    case Coll::Gather:
      k = {per, per * n, per, per, 0};
      break;
    case Coll::HyperCube: {
      const size_t base = count / (4 * static_cast<size_t>(n)) * 4;  // nccl-tests' ALIGN 4
      k = {base, base * n, base, base, 0};
      break;
    }
    case Coll::ReduceScatter:
    case Coll::Scatter:
      k = {per * n, per, per, 0, per};
      break;
    case Coll::AlltoAll:
    case Coll::AlltoAllv:
      k = {per * n, per * n, per, 0, 0};
      if (c == Coll::AlltoAllv && moeActive()) k = {moeMaxSend(per, n), moeMaxRecv(per, n), per, 0, 0};
      break;
    default:
      k = {count, count, count, 0, 0};
      break;
  }
  return k;
}

double collAlgBytes(Coll c, const Counts& k, size_t ts, int n) {
  double b = static_cast<double>(k.param) * static_cast<double>(ts);
  if (c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AlltoAll ||
      c == Coll::AlltoAllv || c == Coll::Gather || c == Coll::Scatter)
    b *= n;
  if (c == Coll::HyperCube) b *= n - 1;  // nccl-tests: what each rank receives
  return b;
}

double collBusFactor(Coll c, int n) {
  switch (c) {
    case Coll::AllReduce: return 2.0 * (n - 1) / n;
    case Coll::AllGather: case Coll::ReduceScatter: case Coll::AlltoAll: case Coll::AlltoAllv:
    case Coll::Gather: case Coll::Scatter:
      return static_cast<double>(n - 1) / n;
    default: return 1.0;
  }
}

void poison(void* buf, size_t bytes) { std::memset(buf, 0xA5, bytes); }

void fillInput(const CheckCase& c, void* send) {
  Gen g(c);
  const uint64_t* enc = encodeTable().bits[c.type];
  size_t n = c.counts.send;
  if (c.coll == Coll::Scatter && c.rank != c.root) n = 0;  // only the root's input is used
  switch (typeSize(c.type)) {
    case 1: {
      auto* p = static_cast<uint8_t*>(send);
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(enc[g.value(c.rank, i)]);
      break;
    }
    case 2: {
      auto* p = static_cast<uint16_t*>(send);
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint16_t>(enc[g.value(c.rank, i)]);
      break;
    }
    case 4: {
      auto* p = static_cast<uint32_t*>(send);
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint32_t>(enc[g.value(c.rank, i)]);
      break;
    }
    default: {
      auto* p = static_cast<uint64_t*>(send);
      for (size_t i = 0; i < n; ++i) p[i] = enc[g.value(c.rank, i)];
      break;
    }
  }
}

int64_t countWrong(const CheckCase& c, const void* recv) {
  Gen g(c);
  const double rel = relTol(c.type), abs = absTol(c.type);
  int64_t wrong = 0;
  auto cmp = [&](size_t j, double want) {
    double got = load(c.type, recv, j);
    if (!(std::fabs(got - want) <= rel * std::fabs(want) + abs)) ++wrong;
  };
  const Counts& k = c.counts;
  switch (c.coll) {
    case Coll::AllReduce:
      for (size_t i = 0; i < k.recv; ++i) cmp(i, reduceExpected(c, g, i));
      break;
    case Coll::Reduce:
      if (c.rank != c.root) break;
      for (size_t i = 0; i < k.recv; ++i) cmp(i, reduceExpected(c, g, i));
      break;
    case Coll::ReduceScatter:
      for (size_t i = 0; i < k.recv; ++i) cmp(i, reduceExpected(c, g, c.rank * k.param + i));
      break;
    case Coll::Broadcast:
      for (size_t i = 0; i < k.recv; ++i) cmp(i, g.value(c.root, i));
      break;
    case Coll::AllGather:
      for (size_t j = 0; j < k.recv; ++j) {
        cmp(j, g.value(static_cast<int>(j / k.param), j % k.param));
      }
      break;
    case Coll::AlltoAll:
      for (size_t j = 0; j < k.recv; ++j) {
        cmp(j, g.value(static_cast<int>(j / k.param), c.rank * k.param + j % k.param));
      }
      break;
    case Coll::SendRecv:
      for (size_t i = 0; i < k.recv; ++i) cmp(i, g.value((c.rank - 1 + c.nranks) % c.nranks, i));
      break;
    case Coll::Gather:
      if (c.rank != c.root) break;
      for (size_t j = 0; j < k.recv; ++j) cmp(j, g.value(static_cast<int>(j / k.param), j % k.param));
      break;
    case Coll::HyperCube:
      for (size_t j = 0; j < k.recv; ++j) cmp(j, g.value(static_cast<int>(j / k.param), j % k.param));
      break;
    case Coll::Scatter:
      for (size_t i = 0; i < k.recv; ++i) cmp(i, g.value(c.root, c.rank * k.param + i));
      break;
    case Coll::AlltoAllv:
      for (int from = 0; from < c.nranks; ++from) {
        const size_t at = a2avRecvDispl(from, c.rank, k.param, c.nranks);
        const size_t src = a2avSendDispl(from, c.rank, k.param, c.nranks);
        for (size_t e = 0; e < a2avCount(from, c.rank, k.param, c.nranks); ++e)
          cmp(at + e, g.value(from, src + e));
      }
      break;
  }
  return wrong;
}

}  // namespace nlccl::perf

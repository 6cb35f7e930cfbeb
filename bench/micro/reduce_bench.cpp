// Throughput of the reduction kernels (dst = dst op src). Bytes processed counts the size of one
// buffer per call, the message size a reduction step consumes; memory traffic is three times that
// (read dst, read src, write dst); bmReduceCopy's is three times it too when fused, five times
// when it copies first.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/reduce.hpp"

namespace {

using nlccl::DataType;
using nlccl::RedOp;

void bmReduce(benchmark::State& state, DataType type, RedOp op) {
  size_t bytes = static_cast<size_t>(state.range(0));
  size_t count = bytes / nlccl::dataTypeSize(type);
  std::vector<uint8_t> dst(bytes), src(bytes);
  // Moderate values (no NaN/Inf) so that timing reflects ordinary data.
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> u(-4.0, 4.0);
  for (size_t i = 0; i < count; ++i) {
    nlccl::kernels::storeFromDouble(type, dst.data(), i, u(rng));
    nlccl::kernels::storeFromDouble(type, src.data(), i, u(rng) * 1e-3);
  }
  auto fn = nlccl::kernels::reduceKernel(type, op);
  for (auto _ : state) {
    fn(dst.data(), src.data(), count);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

// dst = src op incoming: fused (reduceCopy, one sweep) against a whole-buffer copy then a reduce
// (two sweeps), the out-of-place step RecvReduceCopy replaces. Bytes processed: one buffer.
void bmReduceCopy(benchmark::State& state, DataType type, bool fused) {
  size_t bytes = static_cast<size_t>(state.range(0));
  size_t count = bytes / nlccl::dataTypeSize(type);
  std::vector<uint8_t> dst(bytes), src(bytes), in(bytes);
  for (size_t i = 0; i < count; ++i) {
    nlccl::kernels::storeFromDouble(type, src.data(), i, 1.0);
    nlccl::kernels::storeFromDouble(type, in.data(), i, 1e-3);
  }
  auto fn = nlccl::kernels::reduceKernel(type, RedOp::Sum);
  auto fn3 = nlccl::kernels::reduce3Kernel(type, RedOp::Sum);
  for (auto _ : state) {
    if (fused) {
      nlccl::kernels::reduceCopy(fn, fn3, dst.data(), src.data(), in.data(), count);
    } else {
      std::memcpy(dst.data(), src.data(), bytes);
      fn(dst.data(), in.data(), count);
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void bmDivide(benchmark::State& state, DataType type) {
  size_t bytes = static_cast<size_t>(state.range(0));
  size_t count = bytes / nlccl::dataTypeSize(type);
  std::vector<uint8_t> data(bytes), fresh(bytes);
  for (size_t i = 0; i < count; ++i) nlccl::kernels::storeFromDouble(type, fresh.data(), i, 1.0);
  for (auto _ : state) {
    // The same values each time: dividing in place again and again would time subnormals.
    state.PauseTiming();
    data = fresh;
    state.ResumeTiming();
    nlccl::kernels::divideByCount(type, data.data(), count, 3);
    benchmark::DoNotOptimize(data.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

constexpr int64_t kSmall = 64 << 10;
constexpr int64_t kLarge = 4 << 20;

#define NLCCL_REDUCE_BENCH(name, type, op) \
  BENCHMARK_CAPTURE(bmReduce, name, type, op)->Arg(kSmall)->Arg(kLarge)

NLCCL_REDUCE_BENCH(sum_float, DataType::Float32, RedOp::Sum);
NLCCL_REDUCE_BENCH(sum_half, DataType::Float16, RedOp::Sum);
NLCCL_REDUCE_BENCH(sum_bfloat16, DataType::Bfloat16, RedOp::Sum);
NLCCL_REDUCE_BENCH(sum_fp8e4m3, DataType::Float8e4m3, RedOp::Sum);
NLCCL_REDUCE_BENCH(sum_fp8e5m2, DataType::Float8e5m2, RedOp::Sum);
NLCCL_REDUCE_BENCH(sum_int32, DataType::Int32, RedOp::Sum);
NLCCL_REDUCE_BENCH(max_half, DataType::Float16, RedOp::Max);
NLCCL_REDUCE_BENCH(prod_int64, DataType::Int64, RedOp::Prod);
BENCHMARK_CAPTURE(bmReduceCopy, fused_float, DataType::Float32, true)->Arg(kLarge)->Arg(64 << 20);
BENCHMARK_CAPTURE(bmReduceCopy, copy_then_reduce_float, DataType::Float32, false)
    ->Arg(kLarge)
    ->Arg(64 << 20);
BENCHMARK_CAPTURE(bmDivide, avg_float, DataType::Float32)->Arg(kLarge);
BENCHMARK_CAPTURE(bmDivide, avg_half, DataType::Float16)->Arg(kLarge);
BENCHMARK_CAPTURE(bmDivide, avg_bfloat16, DataType::Bfloat16)->Arg(kLarge);
BENCHMARK_CAPTURE(bmDivide, avg_int32, DataType::Int32)->Arg(kLarge);

}  // namespace

BENCHMARK_MAIN();

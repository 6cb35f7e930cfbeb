// Collectives, element types and reduction operators, with nlccl.h's values, for the C++ model API
// (the library's internals use the same types).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nlccl {

/// The collectives a Plan can implement. SendRecv is a grouped set of point-to-point transfers.
/// Gather and Scatter are rooted: rank i's block of `count` elements travels to or from the root.
enum class Collective : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  AllToAll,
  AllToAllv,
  SendRecv,
  Gather,
  Scatter,
};

/// "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "alltoallv",
/// "sendrecv", "gather", "scatter".
constexpr const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::AllGather: return "allgather";
    case Collective::ReduceScatter: return "reducescatter";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AllToAll: return "alltoall";
    case Collective::AllToAllv: return "alltoallv";
    case Collective::SendRecv: return "sendrecv";
    case Collective::Gather: return "gather";
    case Collective::Scatter: return "scatter";
  }
  return "unknown";
}

enum class DataType : int {
  Int8 = 0,
  Uint8 = 1,
  Int32 = 2,
  Uint32 = 3,
  Int64 = 4,
  Uint64 = 5,
  Float16 = 6,
  Float32 = 7,
  Float64 = 8,
  Bfloat16 = 9,
  Float8e4m3 = 10,
  Float8e5m2 = 11,
};
constexpr int kNumDataTypes = 12;

enum class RedOp : int { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4 };
constexpr int kNumRedOps = 5;

constexpr size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::Int8:
    case DataType::Uint8:
    case DataType::Float8e4m3:
    case DataType::Float8e5m2: return 1;
    case DataType::Float16:
    case DataType::Bfloat16: return 2;
    case DataType::Int32:
    case DataType::Uint32:
    case DataType::Float32: return 4;
    case DataType::Int64:
    case DataType::Uint64:
    case DataType::Float64: return 8;
  }
  return 0;
}

}  // namespace nlccl

#include "util/dtype.hpp"

#include <strings.h>

namespace nlccl {

namespace {
struct Name {
  const char* name;
  DataType type;
};
// First name of each type is the one printed (nccl-tests' spelling); the rest are accepted aliases.
const Name kTypeNames[] = {
    {"int8", DataType::Int8},         {"uint8", DataType::Uint8},
    {"int32", DataType::Int32},       {"uint32", DataType::Uint32},
    {"int64", DataType::Int64},       {"uint64", DataType::Uint64},
    {"half", DataType::Float16},      {"float", DataType::Float32},
    {"double", DataType::Float64},    {"bfloat16", DataType::Bfloat16},
    {"f8e4m3", DataType::Float8e4m3}, {"f8e5m2", DataType::Float8e5m2},
    {"char", DataType::Int8},         {"int", DataType::Int32},
    {"float16", DataType::Float16},   {"fp16", DataType::Float16},
    {"float32", DataType::Float32},   {"fp32", DataType::Float32},
    {"float64", DataType::Float64},   {"fp64", DataType::Float64},
    {"bf16", DataType::Bfloat16},     {"fp8e4m3", DataType::Float8e4m3},
    {"fp8e5m2", DataType::Float8e5m2}, {"float8e4m3", DataType::Float8e4m3},
    {"float8e5m2", DataType::Float8e5m2},
};
const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg"};
}  // namespace

bool parseDataType(const char* name, DataType* out) {
  if (name == nullptr) return false;
  for (const Name& n : kTypeNames)
    if (strcasecmp(name, n.name) == 0) {
      *out = n.type;
      return true;
    }
  return false;
}

const char* dataTypeName(DataType t) {
  int i = static_cast<int>(t);
  return (i >= 0 && i < kNumDataTypes) ? kTypeNames[i].name : "unknown";
}

bool parseRedOp(const char* name, RedOp* out) {
  if (name == nullptr) return false;
  for (int i = 0; i < kNumRedOps; ++i)
    if (strcasecmp(name, kOpNames[i]) == 0) {
      *out = static_cast<RedOp>(i);
      return true;
    }
  return false;
}

const char* redOpName(RedOp op) {
  int i = static_cast<int>(op);
  return (i >= 0 && i < kNumRedOps) ? kOpNames[i] : "unknown";
}

}  // namespace nlccl

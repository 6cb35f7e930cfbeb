// Element types and reduction operators (the public nlccl/types.hpp) and their names.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nlccl/types.hpp"

namespace nlccl {

constexpr bool isFloating(DataType t) {
  return t == DataType::Float16 || t == DataType::Float32 || t == DataType::Float64 ||
         t == DataType::Bfloat16 || t == DataType::Float8e4m3 || t == DataType::Float8e5m2;
}

/// Parses names as nccl-tests prints them ("float", "half", "bfloat16", "int8", "fp8e4m3", ...).
bool parseDataType(const char* name, DataType* out);
const char* dataTypeName(DataType t);  // nccl-tests' names: "int8", "uint8", "int32", ..., "float"
bool parseRedOp(const char* name, RedOp* out);
const char* redOpName(RedOp op);  // "sum", "prod", "max", "min", "avg"

}  // namespace nlccl

// What a communicator keeps for its user besides the data path: registered buffers and windows
// (nlcclCommRegister, nlcclCommWindowRegister) and custom reduction operators
// (nlcclRedOpCreatePreMulSum). Handles are checked against the live set before use, so a stale or
// foreign handle is an InvalidArgument, never a dereference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "util/dtype.hpp"
#include "util/status.hpp"

namespace nlccl::core {

/// A pre-multiply-then-sum operator: each rank's input times `scalar` (of `dtype`), then Sum.
struct PreMulSum {
  DataType dtype = DataType::Float32;
  bool immediate = true;          ///< the scalar was read at creation (into `value`)
  uint8_t value[8] = {};          ///< the scalar's bytes (immediate)
  const void* pointer = nullptr;  ///< read when the collective runs (nlcclScalarDevice)
};

/// A registered region of user memory.
struct Registration {
  void* ptr = nullptr;
  size_t bytes = 0;
  int flags = 0;       ///< window flags (NLCCL_WIN_*); 0 for nlcclCommRegister
  bool window = false;
};

class Resources {
 public:
  /// The first operator value (nlcclNumOps) and the largest (nlcclMaxRedOp).
  static constexpr int kFirstOp = 5;
  static constexpr int kMaxOp = 0x7fffffff;

  /// Records a region and returns its handle.
  void* add(const Registration& r);
  /// Removes a region by handle; false when `handle` is not a live one of the given kind.
  bool remove(void* handle, bool window);
  /// The region of a live handle of the given kind.
  std::optional<Registration> find(void* handle, bool window) const;
  /// Regions registered now (both kinds).
  size_t registered() const;

  /// A new operator's value (>= kFirstOp); InvalidUsage when the value space is used up.
  Status addOp(const PreMulSum& op, int* value);
  bool removeOp(int value);
  std::optional<PreMulSum> op(int value) const;

 private:
  mutable std::mutex mu_;
  std::map<const void*, std::unique_ptr<Registration>> regions_;
  std::map<int, PreMulSum> ops_;
};

}  // namespace nlccl::core

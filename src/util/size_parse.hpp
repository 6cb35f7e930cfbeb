// Byte sizes with binary suffixes ("4096", "512K", "1M", "2GiB", "8kb"), shared by the command
// lines (nlccl-perf -b/-e/-i, nlccl-sim -b/-e) and environment variables (e.g.
// NLCCL_SHM_SLOT_BYTES). Depends on nothing else in nlccl, so tools built on the C API can use it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace nlccl::util {

/// Parses decimal digits, then an optional K, M or G (any case; powers of 1024, as nccl-tests'
/// parsesize), an optional 'i' after that letter, and an optional trailing B or b. No sign, no
/// spaces, no fraction. Returns false, with `error` (if given) set to a one-line reason, when the
/// text does not match or the value does not fit in 64 bits; *out is left unchanged then.
bool parseSize(std::string_view text, uint64_t* out, std::string* error = nullptr);

}  // namespace nlccl::util

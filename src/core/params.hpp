// Environment parameters (declared once in params.def). They are read when a communicator is made,
// never on a hot path, so each call reads the environment afresh.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nlccl::core {

struct ParamInfo {
  const char* env;      ///< full variable name, e.g. "NLCCL_TIMEOUT_MS"
  const char* doc;
  std::string defaultValue;
};

#define NLCCL_PARAM(name, env, type, def, doc) type param##name();
#include "core/params.def"
#undef NLCCL_PARAM

/// Every parameter with its documentation (for the README check and `--help` texts).
std::vector<ParamInfo> allParams();
/// Makes logging reread NLCCL_DEBUG* (tests that setenv them).
void resetParams();

}  // namespace nlccl::core

// Environment parameters, declared once in params.def. Each paramName() reads NLCCL_<SUFFIX>
// afresh (they are read when a communicator is made, never on a hot path): the default when it
// is unset, else its value; a malformed value is logged once per read, naming the variable, and
// gives the default with ok = false (callers that must refuse it check ok).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nlccl {

template <typename T>
struct Param {
  T value{};
  T def{};           ///< the declared default
  bool set = false;  ///< the variable is set (and not empty)
  bool ok = true;    ///< false: set but malformed (value is the default)
  operator const T&() const { return value; }
};

namespace params {
using Int = int64_t;
using Double = double;
using Bytes = uint64_t;
using String = std::string;
}  // namespace params

#define NLCCL_PARAM(name, env, kind, def, doc) \
  Param<params::kind> param##name();           \
  const char* param##name##Text(); /* the raw text, nullptr when unset; never logs */
#include "util/params.def"
#undef NLCCL_PARAM

struct ParamInfo {
  const char* env;  ///< full variable name, e.g. "NLCCL_TIMEOUT_MS"
  const char* doc;
  std::string defaultValue;
};
/// A variable of another library that nlccl consults (libfabric's FI_PROVIDER), read here so that
/// params.cpp stays the one place that reads the environment; nullptr when unset. Only the names
/// params.cpp lists are served (others: nullptr).
const char* foreignEnv(const char* name);

/// Every parameter with its documentation (for the README check and `--help` texts).
std::vector<ParamInfo> allParams();
/// The text of a declared parameter `env` ("NLCCL_..."): its value when set (non-empty), else
/// its default. False when no parameter has that name.
bool paramText(const std::string& env, std::string* out);
/// Makes logging and tracing reread NLCCL_DEBUG* and NLCCL_TRACE_FILE (tests that setenv them).
void resetParams();

}  // namespace nlccl

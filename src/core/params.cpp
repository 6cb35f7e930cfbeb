#include "core/params.hpp"

#include <cstdlib>
#include <sstream>

#include "util/log.hpp"

namespace nlccl::core {

namespace {
template <typename T>
T parse(const char* env, const char* text, T def);

template <>
int64_t parse<int64_t>(const char* env, const char* text, int64_t def) {
  char* end = nullptr;
  long long v = strtoll(text, &end, 0);
  if (end == text || *end != '\0') {
    WARN("%s=%s is not an integer; using %lld", env, text, static_cast<long long>(def));
    return def;
  }
  return v;
}

template <>
std::string parse<std::string>(const char*, const char* text, std::string) {
  return text;
}

template <typename T>
T read(const char* env, T def) {
  const char* v = getenv(env);
  if (v == nullptr) return def;
  INFO(log::kEnv, "%s set by environment to %s", env, v);
  return parse<T>(env, v, def);
}

template <typename T>
std::string show(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

#define NLCCL_PARAM(name, env, type, def, doc) \
  type param##name() { return read<type>("NLCCL_" env, type(def)); }
#include "core/params.def"
#undef NLCCL_PARAM

std::vector<ParamInfo> allParams() {
  std::vector<ParamInfo> out;
#define NLCCL_PARAM(name, env, type, def, doc) out.push_back({"NLCCL_" env, doc, show(type(def))});
#include "core/params.def"
#undef NLCCL_PARAM
  return out;
}

void resetParams() { log::reset(); }

}  // namespace nlccl::core

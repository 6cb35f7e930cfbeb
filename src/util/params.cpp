#include "util/params.hpp"

#include <cstdlib>
#include <sstream>

#include "util/log.hpp"
#include "util/size_parse.hpp"
#include "util/trace.hpp"

namespace nlccl {

namespace {

bool parseInt(const char* text, params::Int* out) {
  char* end = nullptr;
  const long long v = strtoll(text, &end, 0);
  if (end == text || *end != '\0') return false;
  *out = v;
  return true;
}
bool parseDouble(const char* text, params::Double* out) {
  char* end = nullptr;
  const double v = strtod(text, &end);
  if (end == text || *end != '\0') return false;
  *out = v;
  return true;
}
bool parseString(const char* text, params::String* out) {
  *out = text;
  return true;
}
// Bytes share the tools' parser (util/size_parse.hpp); params::Bytes is uint64_t like it.
bool parseBytes(const char* text, params::Bytes* out) { return util::parseSize(text, out); }

template <typename T, typename Parser>
Param<T> read(const char* env, T def, Parser parser) {
  Param<T> p;
  p.value = p.def = def;
  const char* v = getenv(env);
  if (v == nullptr || *v == '\0') return p;
  p.set = true;
  INFO(log::kEnv, "%s set by environment to %s", env, v);
  T parsed{};
  if (!parser(v, &parsed)) {
    WARN("%s=%s is not a valid value; using the default", env, v);
    p.ok = false;
    return p;
  }
  p.value = parsed;
  return p;
}

template <typename T>
std::string show(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

#define NLCCL_PARAM(name, env, kind, def, doc)                                      \
  Param<params::kind> param##name() {                                               \
    return read<params::kind>("NLCCL_" env, params::kind(def), parse##kind);        \
  }                                                                                 \
  const char* param##name##Text() { return getenv("NLCCL_" env); }
#include "util/params.def"
#undef NLCCL_PARAM

std::vector<ParamInfo> allParams() {
  std::vector<ParamInfo> out;
#define NLCCL_PARAM(name, env, kind, def, doc) \
  out.push_back({"NLCCL_" env, doc, show(params::kind(def))});
#include "util/params.def"
#undef NLCCL_PARAM
  return out;
}

bool paramText(const std::string& env, std::string* out) {
  for (const ParamInfo& p : allParams()) {
    if (env != p.env) continue;
    const char* v = getenv(p.env);
    *out = (v != nullptr && *v != '\0') ? std::string(v) : p.defaultValue;
    return true;
  }
  return false;
}

const char* foreignEnv(const char* name) {
  static const char* const kKnown[] = {"FI_PROVIDER"};
  for (const char* k : kKnown)
    if (std::string_view(name) == k) return getenv(k);
  return nullptr;
}

void resetParams() {
  log::reset();
  trace::reset();
}

}  // namespace nlccl

// NCCL's parameter API (ncclParamBind, ncclParamGet*, ...) over nlccl's parameter table
// (src/util/params.def): every NLCCL_* variable of the README, read as NCCL reads its own.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "api/api.hpp"
#include "util/params.hpp"

using namespace nlccl;
using api::guard;

struct nlcclParamHandle {
  std::string env;  // "NLCCL_..."
};

namespace {

/// One handle per parameter, made once: handles are never freed (NCCL's are owned by NCCL too).
const std::vector<nlcclParamHandle>& handles() {
  static const std::vector<nlcclParamHandle> all = [] {
    std::vector<nlcclParamHandle> v;
    for (const ParamInfo& p : allParams()) v.push_back({p.env});
    return v;
  }();
  return all;
}

bool isHandle(nlcclParamHandle_t h) {
  const auto& all = handles();
  return h != nullptr && h >= all.data() && h < all.data() + all.size();
}

Status checkHandle(nlcclParamHandle_t h, const void* out, const char* func) {
  if (!isHandle(h)) {
    WARN("%s: h is not a handle from nlcclParamBind", func);
    return Status::InvalidArgument;
  }
  if (out == nullptr) {
    WARN("%s: out is NULL", func);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

/// The parameter's text as an integer in [lo, hi].
template <typename T>
Status getInt(nlcclParamHandle_t h, T* out, const char* func) {
  API_CHECK(checkHandle(h, out, func));
  std::string text;
  paramText(h->env, &text);
  errno = 0;
  char* end = nullptr;
  bool ok = false;
  if constexpr (std::is_signed_v<T>) {
    long long v = std::strtoll(text.c_str(), &end, 0);
    ok = errno == 0 && end != text.c_str() && *end == '\0' &&
         v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
    if (ok) *out = static_cast<T>(v);
  } else {
    unsigned long long v = std::strtoull(text.c_str(), &end, 0);
    ok = errno == 0 && end != text.c_str() && *end == '\0' && text[0] != '-' &&
         v <= std::numeric_limits<T>::max();
    if (ok) *out = static_cast<T>(v);
  }
  if (!ok) {
    WARN("%s: %s = '%s' is not an integer of that width", func, h->env.c_str(), text.c_str());
    return Status::InvalidArgument;
  }
  return Status::Success;
}

thread_local std::string tText;
thread_local std::vector<const char*> tKeys;

}  // namespace

NLCCL_API nlcclResult_t nlcclParamBind(nlcclParamHandle_t* out, const char* key) {
  return guard(nullptr, [&] {
    if (out == nullptr || key == nullptr) {
      WARN("nlcclParamBind: %s is NULL", out == nullptr ? "out" : "key");
      return Status::InvalidArgument;
    }
    std::string env = std::strncmp(key, "NLCCL_", 6) == 0 ? key : std::string("NLCCL_") + key;
    for (const nlcclParamHandle& h : handles())
      if (h.env == env) {
        *out = const_cast<nlcclParamHandle_t>(&h);
        return Status::Success;
      }
    WARN("nlcclParamBind: key '%s' names no nlccl parameter (see the README's Environment table)",
         key);
    return Status::InvalidArgument;
  });
}

#define NLCCL_PARAM_GET(Suffix, T)                                                     \
  NLCCL_API nlcclResult_t nlcclParamGet##Suffix(nlcclParamHandle_t h, T* out) {        \
    return guard(nullptr, [&] { return getInt<T>(h, out, "nlcclParamGet" #Suffix); }); \
  }
NLCCL_PARAM_GET(I8, int8_t)
NLCCL_PARAM_GET(I16, int16_t)
NLCCL_PARAM_GET(I32, int32_t)
NLCCL_PARAM_GET(I64, int64_t)
NLCCL_PARAM_GET(U8, uint8_t)
NLCCL_PARAM_GET(U16, uint16_t)
NLCCL_PARAM_GET(U32, uint32_t)
NLCCL_PARAM_GET(U64, uint64_t)
#undef NLCCL_PARAM_GET

NLCCL_API nlcclResult_t nlcclParamGetStr(nlcclParamHandle_t h, const char** out) {
  return guard(nullptr, [&] {
    API_CHECK(checkHandle(h, out, "nlcclParamGetStr"));
    paramText(h->env, &tText);
    *out = tText.c_str();
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclParamGet(nlcclParamHandle_t h, void* out, int maxLen, int* len) {
  return guard(nullptr, [&] {
    API_CHECK(checkHandle(h, out, "nlcclParamGet"));
    if (len == nullptr) {
      WARN("nlcclParamGet: len is NULL");
      return Status::InvalidArgument;
    }
    std::string text;
    paramText(h->env, &text);
    if (maxLen < static_cast<int>(text.size()) + 1) {
      WARN("nlcclParamGet: maxLen %d is too small for %s (%zu bytes with the NUL)", maxLen,
           h->env.c_str(), text.size() + 1);
      return Status::InvalidArgument;
    }
    std::memcpy(out, text.c_str(), text.size() + 1);
    *len = static_cast<int>(text.size());
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclParamGetParameter(const char* key, const char** value, int* valueLen) {
  return guard(nullptr, [&] {
    nlcclParamHandle_t h = nullptr;
    if (nlcclParamBind(&h, key) != nlcclSuccess) return Status::InvalidArgument;
    if (value == nullptr || valueLen == nullptr) {
      WARN("nlcclParamGetParameter: %s is NULL", value == nullptr ? "value" : "valueLen");
      return Status::InvalidArgument;
    }
    paramText(h->env, &tText);
    *value = tText.c_str();
    *valueLen = static_cast<int>(tText.size());
    return Status::Success;
  });
}

NLCCL_API nlcclResult_t nlcclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  return guard(nullptr, [&] {
    if (table == nullptr || tableLen == nullptr) {
      WARN("nlcclParamGetAllParameterKeys: %s is NULL", table == nullptr ? "table" : "tableLen");
      return Status::InvalidArgument;
    }
    tKeys.clear();
    for (const nlcclParamHandle& h : handles()) tKeys.push_back(h.env.c_str());
    *table = tKeys.data();
    *tableLen = static_cast<int>(tKeys.size());
    return Status::Success;
  });
}

NLCCL_API void nlcclParamDumpAll(void) {
  for (const nlcclParamHandle& h : handles()) {
    std::string text;
    paramText(h.env, &text);
    INFO(log::kEnv, "%s = %s", h.env.c_str(), text.c_str());
  }
}

NLCCL_API void nlcclResetDebugInit(void) { resetParams(); }

// nlcclConfig_t: NCCL's fields (accepted; those without meaning on a host are ignored) and
// nlccl's own. A field is read only when the caller's struct is large enough to hold it (its
// `size`), so a program built against an older, shorter nlcclConfig_t keeps working.
#include <cstddef>

#include "api/api.hpp"
#include "core/init.hpp"

namespace nlccl::api {

namespace {

/// True when `cfg` (of cfg->size bytes) holds the field at `offset` of `bytes` and it is set.
bool has(const nlcclConfig_t* cfg, size_t offset, size_t bytes) {
  return cfg->size >= offset + bytes;
}
#define NLCCL_HAS(cfg, field) has(cfg, offsetof(nlcclConfig_t, field), sizeof(cfg->field))

/// InvalidArgument unless an int field is unset or within [lo, hi].
Status inRange(int v, int lo, int hi, const char* name, const char* func) {
  if (v == NLCCL_CONFIG_UNDEF_INT || (v >= lo && v <= hi)) return Status::Success;
  WARN("%s: config->%s %d is out of range [%d, %d]", func, name, v, lo, hi);
  return Status::InvalidArgument;
}

}  // namespace

Status applyConfig(const nlcclConfig_t* cfg, core::CommConfig* out, const char* func) {
  *out = core::defaultConfig();
  if (cfg == nullptr) return Status::Success;
  if (cfg->magic != NLCCL_API_MAGIC || cfg->size < offsetof(nlcclConfig_t, blocking) + sizeof(int)) {
    WARN("%s: config was not initialised with NLCCL_CONFIG_INITIALIZER", func);
    return Status::InvalidArgument;
  }
  // NCCL's fields. Booleans and counts are range-checked as NCCL does; none changes anything here.
#define NLCCL_RANGE(field, lo, hi) \
  if (NLCCL_HAS(cfg, field)) API_CHECK(inRange(cfg->field, lo, hi, #field, func))
  NLCCL_RANGE(blocking, 0, 1);
  NLCCL_RANGE(cgaClusterSize, 0, 8);
  NLCCL_RANGE(minCTAs, 1, 64);
  NLCCL_RANGE(maxCTAs, 1, 64);
  NLCCL_RANGE(splitShare, 0, 1);
  NLCCL_RANGE(collnetEnable, 0, 1);
  NLCCL_RANGE(CTAPolicy, 0, NLCCL_CTA_POLICY_EFFICIENCY | NLCCL_CTA_POLICY_ZERO);
  NLCCL_RANGE(shrinkShare, 0, 1);
#undef NLCCL_RANGE
  if (NLCCL_HAS(cfg, maxCTAs) && cfg->minCTAs != NLCCL_CONFIG_UNDEF_INT &&
      cfg->maxCTAs != NLCCL_CONFIG_UNDEF_INT && cfg->minCTAs > cfg->maxCTAs) {
    WARN("%s: config->minCTAs %d is larger than config->maxCTAs %d", func, cfg->minCTAs,
         cfg->maxCTAs);
    return Status::InvalidArgument;
  }
  if (NLCCL_HAS(cfg, commName) && cfg->commName) out->name = cfg->commName;
  // nlccl's fields.
  if (NLCCL_HAS(cfg, timeoutMs) && cfg->timeoutMs != NLCCL_CONFIG_UNDEF_INT) {
    if (cfg->timeoutMs <= 0) {
      WARN("%s: config->timeoutMs %d must be positive", func, cfg->timeoutMs);
      return Status::InvalidArgument;
    }
    out->timeout = std::chrono::milliseconds(cfg->timeoutMs);
  }
  if (NLCCL_HAS(cfg, transport) && cfg->transport) out->transport = cfg->transport;
  if (NLCCL_HAS(cfg, topology) && cfg->topology) out->topology = cfg->topology;
  if (NLCCL_HAS(cfg, algorithm) && cfg->algorithm) out->algorithm = cfg->algorithm;
  if (core::checkTransportChoice(out->transport) != Status::Success) {
    WARN("%s: config->transport or NLCCL_TRANSPORT names no transport of this build", func);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

}  // namespace nlccl::api

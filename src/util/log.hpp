// Logging: NLCCL_DEBUG (WARN, INFO, TRACE), NLCCL_DEBUG_SUBSYS (INIT,COLL,P2P,SHM,NET,SIM,TUNE,
// BOOTSTRAP,ALL; '^' inverts) and NLCCL_DEBUG_FILE (%h host, %p pid, %r rank). The level is checked
// before anything is formatted. Every WARN is also kept as the calling thread's last error message,
// which the C API hands to nlcclGetLastError.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "util/status.hpp"

namespace nlccl::log {

enum class Level : int { None = 0, Warn = 1, Info = 2, Trace = 3 };

enum Subsys : uint32_t {
  kInit = 1u << 0,
  kColl = 1u << 1,
  kP2P = 1u << 2,
  kShm = 1u << 3,
  kNet = 1u << 4,
  kSim = 1u << 5,
  kTune = 1u << 6,  ///< the tuner's candidates and choices
  kBootstrap = 1u << 7,
  kEnv = 1u << 8,
  kAll = ~0u,
};

namespace detail {
extern std::atomic<int> gLevel;  ///< NLCCL_DEBUG's level once read, -1 before
bool enabledSlow(Level level, uint32_t subsys);
}  // namespace detail

/// True when a message at `level` for `subsys` would be written. Inline, as every call checks
/// it: with logging off (the level read and below `level`) one relaxed load and a compare.
inline bool enabled(Level level, uint32_t subsys) {
  const int lvl = detail::gLevel.load(std::memory_order_relaxed);
  if (lvl >= 0 && static_cast<int>(level) > lvl) return false;
  return detail::enabledSlow(level, subsys);
}
/// Writes a line; WARN lines are also stored as the thread's last error. printf-style.
void write(Level level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
/// One INFO line "file:line (func) -> status" (used by NLCHECK).
void trail(const char* file, int line, const char* func, Status s);

/// The last WARN message of the calling thread ("" if none); clearLastError() resets it.
const std::string& lastError();
void clearLastError();
/// Sets the last error text without printing (for errors callers are expected to handle).
void setLastError(const std::string& msg);

/// Rank used in line prefixes (per thread; -1 when unknown) and for %r in NLCCL_DEBUG_FILE (the
/// thread's, else the first one set in the process; a file opened before it was known is renamed).
void setThreadRank(int rank);

/// `pattern` with %h (host name), %p (pid) and %r (`rank`) filled in (NLCCL_DEBUG_FILE and
/// NLCCL_TRACE_FILE).
std::string expandPath(const char* pattern, int rank);

/// Rereads the environment (tests use it after setenv).
void reset();

}  // namespace nlccl::log

#define NLCCL_LOG_(lvl, sub, ...)                                                       \
  do {                                                                                  \
    if (::nlccl::log::enabled(lvl, sub))                                                \
      ::nlccl::log::write(lvl, sub, __FILE__, __LINE__, __VA_ARGS__);                   \
  } while (0)

/// WARN is always recorded as the last error, even when not printed.
#define WARN(...) ::nlccl::log::write(::nlccl::log::Level::Warn, ::nlccl::log::kAll, __FILE__, __LINE__, __VA_ARGS__)
#define INFO(sub, ...) NLCCL_LOG_(::nlccl::log::Level::Info, sub, __VA_ARGS__)
#define TRACE(sub, ...) NLCCL_LOG_(::nlccl::log::Level::Trace, sub, __VA_ARGS__)

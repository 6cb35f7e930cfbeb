#include "util/log.hpp"

#include "util/params.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

namespace nlccl::log {

std::atomic<int> detail::gLevel{-1};  // -1: not read yet

namespace {

using detail::gLevel;
std::atomic<uint32_t> gMask{kAll};
std::mutex gMutex;
FILE* gOut = nullptr;
thread_local std::string tLastError;  // meaningful while tHasError
// Every API call clears the last error: a flag that is trivially destructible (a thread_local
// std::string has a guard variable, reached through __tls_get_addr) and initial-exec (the
// general-dynamic model a shared library gets by default costs a __tls_get_addr call per access;
// one byte fits the static TLS glibc keeps for libraries loaded later with dlopen, as Python
// loads the torch binding).
__attribute__((tls_model("initial-exec"))) thread_local bool tHasError = false;
thread_local int tRank = -1;
// NLCCL_DEBUG_FILE: the path opened, and whether it was expanded before the rank was known (%r
// as -1): the first line is usually logged before init knows the rank, so the file is renamed
// then. %r takes the calling thread's rank, else the process's (set by process init).
std::string gPath;
bool gRankPending = false;
std::atomic<int> gProcessRank{-1};

uint32_t parseSubsys(const char* s) {
  if (s == nullptr || *s == '\0') return kInit | kEnv;  // NCCL's default: INIT and ENV
  bool invert = false;
  if (*s == '^') {
    invert = true;
    ++s;
  }
  uint32_t mask = 0;
  std::string_view all(s);
  while (!all.empty()) {
    size_t comma = all.find(',');
    std::string_view tok = all.substr(0, comma);
    struct {
      const char* name;
      uint32_t bit;
    } const names[] = {{"INIT", kInit}, {"COLL", kColl}, {"P2P", kP2P}, {"SHM", kShm},
                       {"NET", kNet},   {"SIM", kSim},   {"TUNE", kTune}, {"BOOTSTRAP", kBootstrap},
                       {"ENV", kEnv},   {"ALL", kAll}};
    for (const auto& n : names)
      if (tok.size() == strlen(n.name) && strncasecmp(tok.data(), n.name, tok.size()) == 0)
        mask |= n.bit;
    if (comma == std::string_view::npos) break;
    all.remove_prefix(comma + 1);
  }
  return invert ? ~mask : mask;
}

/// The rank %r of NLCCL_DEBUG_FILE stands for in the calling thread.
int pathRank() { return tRank >= 0 ? tRank : gProcessRank.load(); }

}  // namespace

std::string expandPath(const char* pattern, int rank) {
  std::string out;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  for (const char* p = pattern; *p; ++p) {
    if (*p == '%' && p[1]) {
      ++p;
      if (*p == 'h') out += host;
      else if (*p == 'p') out += std::to_string(getpid());
      else if (*p == 'r') out += std::to_string(rank);
      else out += *p;
    } else {
      out += *p;
    }
  }
  return out;
}

namespace {

int loadLevel() {
  int lvl = gLevel.load(std::memory_order_acquire);
  if (lvl >= 0) return lvl;
  std::lock_guard<std::mutex> lock(gMutex);
  lvl = gLevel.load(std::memory_order_relaxed);
  if (lvl >= 0) return lvl;
  const char* e = paramDebugText();
  Level l = Level::None;
  if (e != nullptr) {
    if (strcasecmp(e, "WARN") == 0) l = Level::Warn;
    else if (strcasecmp(e, "INFO") == 0) l = Level::Info;
    else if (strcasecmp(e, "TRACE") == 0) l = Level::Trace;
  }
  gMask.store(parseSubsys(paramDebugSubsysText()), std::memory_order_relaxed);
  const char* f = paramDebugFileText();
  if (f != nullptr && *f) {
    const int rank = pathRank();
    gPath = expandPath(f, rank);
    gOut = fopen(gPath.c_str(), "w");
    gRankPending = gOut != nullptr && strstr(f, "%r") != nullptr && rank < 0;
  }
  if (gOut == nullptr) gOut = stderr;
  gLevel.store(static_cast<int>(l), std::memory_order_release);
  return static_cast<int>(l);
}

}  // namespace

bool detail::enabledSlow(Level level, uint32_t subsys) {
  int lvl = loadLevel();
  if (static_cast<int>(level) > lvl) return false;
  return level == Level::Warn || (gMask.load(std::memory_order_relaxed) & subsys) != 0;
}

void write(Level level, uint32_t subsys, const char* file, int line, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == Level::Warn) {
    tLastError = msg;
    tHasError = true;
  }
  if (!enabled(level, subsys)) return;
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  static const char* const names[] = {"", "WARN", "INFO", "TRACE"};
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  std::lock_guard<std::mutex> lock(gMutex);
  fprintf(gOut, "%s:%d:%d [%d] NLCCL %s %s:%d %s\n", host, getpid(), static_cast<int>(gettid()),
          tRank, names[static_cast<int>(level)], base, line, msg);
  fflush(gOut);
}

void trail(const char* file, int line, const char* func, Status s) {
  NLCCL_LOG_(Level::Info, kAll, "%s:%d (%s) -> %s", file, line, func, statusName(s));
}

const std::string& lastError() {
  static const std::string none;
  return tHasError ? tLastError : none;
}
void clearLastError() { tHasError = false; }
void setLastError(const std::string& msg) {
  tLastError = msg;
  tHasError = true;
}
void setThreadRank(int rank) {
  tRank = rank;
  if (rank < 0) return;
  int unknown = -1;
  if (!gProcessRank.compare_exchange_strong(unknown, rank)) return;  // the first rank names it
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gRankPending) return;
  gRankPending = false;
  const std::string path = expandPath(paramDebugFileText(), rank);
  fclose(gOut);
  if (std::rename(gPath.c_str(), path.c_str()) == 0) gPath = path;
  gOut = fopen(gPath.c_str(), "a");
  if (gOut == nullptr) gOut = stderr;
}

void reset() {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gOut != nullptr && gOut != stderr) fclose(gOut);
  gOut = nullptr;
  gRankPending = false;
  gLevel.store(-1);
}

}  // namespace nlccl::log

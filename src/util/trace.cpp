#include "util/trace.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "util/log.hpp"
#include "util/params.hpp"

namespace nlccl::trace {

namespace detail {
std::atomic<int> gState{-1};
}  // namespace detail

namespace {

constexpr const char* kHead = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
constexpr const char* kTail = "\n]}\n";
constexpr size_t kFlushBytes = 4u << 20;

/// One output file: events are buffered and appended in batches; after every batch the file
/// ends with kTail, so it is valid JSON whenever it was last flushed.
struct File {
  FILE* f = nullptr;
  bool any = false;       ///< an event is in the file already
  std::string pending;    ///< events not yet written, each preceded by ",\n" but the first
  std::set<std::pair<int, int>> named;  ///< (pid, tid) tracks whose name was written
  std::set<int> namedProcs;
};

struct State {
  std::mutex mu;
  pid_t owner = getpid();
  std::string pattern;
  std::map<std::string, std::unique_ptr<File>> files;  ///< by expanded name
  std::map<int, File*> byRank;
  bool atexitSet = false;
};

State* gTrace = new State;  // leaked: flushed at exit, used by threads until then

void writeBatch(File& file) {
  if (file.pending.empty() || file.f == nullptr) return;
  if (!file.any) {
    std::fputs(kHead, file.f);
  } else {
    std::fseek(file.f, -static_cast<long>(std::char_traits<char>::length(kTail)), SEEK_END);
    std::fputs(",\n", file.f);
  }
  std::fputs(file.pending.c_str(), file.f);
  std::fputs(kTail, file.f);
  std::fflush(file.f);
  file.any = true;
  file.pending.clear();
}

void append(File& file, const std::string& event) {
  if (!file.pending.empty()) file.pending += ",\n";
  file.pending += event;
  if (file.pending.size() > kFlushBytes) writeBatch(file);
}

void flushLocked(State& s) {
  for (auto& [name, file] : s.files) writeBatch(*file);
}

/// The state of this process; a forked child starts afresh (its parent's buffers are not its).
State& state() {
  if (gTrace->owner != getpid()) {
    // The parent's state may be mid-use by a thread that does not exist here: leave it, keep
    // only the file name pattern (and the exit hook, which fork inherits).
    State* fresh = new State;
    fresh->pattern = gTrace->pattern;
    fresh->atexitSet = gTrace->atexitSet;
    gTrace = fresh;
  }
  return *gTrace;
}

File* fileFor(State& s, int rank) {
  auto it = s.byRank.find(rank);
  if (it != s.byRank.end()) return it->second;
  const std::string name = log::expandPath(s.pattern.c_str(), rank);
  auto& slot = s.files[name];
  if (!slot) {
    slot = std::make_unique<File>();
    slot->f = std::fopen(name.c_str(), "w");
    if (slot->f == nullptr) WARN("NLCCL_TRACE_FILE: cannot write %s", name.c_str());
  }
  s.byRank[rank] = slot.get();
  return slot.get();
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

}  // namespace

bool detail::readState() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  int st = gState.load();
  if (st >= 0) return st > 0;
  Param<std::string> p = paramTraceFile();
  s.pattern = p.value;
  st = s.pattern.empty() ? 0 : 1;
  if (st && !s.atexitSet) {
    s.atexitSet = true;
    std::atexit(flush);
  }
  gState.store(st);
  return st > 0;
}

double nowUs() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void span(int rank, Track track, int tid, const char* thread, const char* name, const char* cat,
          double startUs, double durUs, const std::string& args) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.pattern.empty()) return;
  File* file = fileFor(s, rank);
  if (file == nullptr || file->f == nullptr) return;
  const int pid = track == Track::Real ? rank : 1000000 + rank;
  char buf[512];
  if (file->namedProcs.insert(pid).second) {
    char host[128] = {};
    gethostname(host, sizeof host - 1);
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":"
                  "\"rank %d%s (pid %d on %s)\"}}",
                  pid, rank, track == Track::Real ? "" : " modelled", static_cast<int>(getpid()),
                  host);
    append(*file, buf);
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":"
                  "{\"sort_index\":%d}}",
                  pid, pid);
    append(*file, buf);
  }
  if (file->named.insert({pid, tid}).second) {
    std::snprintf(buf, sizeof buf,
                  "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":%s}}",
                  pid, tid, quoted(thread).c_str());
    append(*file, buf);
  }
  std::snprintf(buf, sizeof buf,
                "{\"ph\":\"X\",\"name\":%s,\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,"
                "\"dur\":%.3f,\"args\":{",
                quoted(name).c_str(), cat, pid, tid, startUs, durUs < 0 ? 0.0 : durUs);
  append(*file, std::string(buf) + args + "}}");
}

void flush() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  flushLocked(s);
}

void reset() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  flushLocked(s);
  for (auto& [name, file] : s.files)
    if (file->f) std::fclose(file->f);
  s.files.clear();
  s.byRank.clear();
  s.pattern.clear();
  detail::gState.store(-1);
}

}  // namespace nlccl::trace

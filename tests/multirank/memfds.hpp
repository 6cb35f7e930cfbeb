// What nlccl's shared memory leaves behind, found where it can actually be: nlccl's shared memory
// (transport segments, the neuronlink timeline, nlcclMemAlloc buffers) is nameless memfds
// ("memfd:nlccl-mem-<64-bit id>"), never entries in /dev/shm, so a /dev/shm check cannot fail for
// it. A memfd lives as long as some process maps it or holds a descriptor of it; after a job has
// exited, its memory is left behind exactly when a process still does. So: forked ranks record
// the memfds they map or hold in a ledger (shared memory made before the fork), and once all have
// exited no process on the host may still map or hold any of them (/proc/*/maps, /proc/*/fd).
// The ids carry random bits, so other jobs running at the same time never match.
#pragma once

#include <dirent.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace nlccl::testing {

inline constexpr char kMemfdToken[] = "nlccl-mem-";
inline constexpr size_t kMemfdNameLen = sizeof(kMemfdToken) - 1 + 16;  // token + 16 hex digits

/// The nlccl memfd names in a line of /proc/<pid>/maps or a /proc/<pid>/fd link target.
inline void memfdNamesIn(const std::string& s, std::set<std::string>* out) {
  for (size_t at = s.find(kMemfdToken); at != std::string::npos; at = s.find(kMemfdToken, at + 1))
    if (s.size() - at >= kMemfdNameLen && s.compare(at > 0 ? at - 7 : 0, 7, "/memfd:") == 0)
      out->insert(s.substr(at, kMemfdNameLen));
}

/// The nlccl memfds process `pid` maps or holds open (empty when it is gone or not ours to read).
inline std::set<std::string> memfdsOf(pid_t pid) {
  std::set<std::string> names;
  const std::string dir = "/proc/" + std::to_string(pid);
  std::ifstream maps(dir + "/maps");
  for (std::string line; std::getline(maps, line);) memfdNamesIn(line, &names);
  if (DIR* d = opendir((dir + "/fd").c_str())) {
    while (dirent* e = readdir(d)) {
      char target[256];
      const ssize_t n = readlink((dir + "/fd/" + e->d_name).c_str(), target, sizeof target - 1);
      if (n > 0) memfdNamesIn(std::string(target, static_cast<size_t>(n)), &names);
    }
    closedir(d);
  }
  return names;
}

/// Every live process that maps or holds one of `names`, as "pid <pid> (<comm>): <name>".
inline std::vector<std::string> memfdHolders(const std::set<std::string>& names) {
  std::vector<std::string> found;
  if (names.empty()) return found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {"cannot read /proc"};
  while (dirent* e = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(atoi(e->d_name));
    if (pid <= 0) continue;
    for (const std::string& n : memfdsOf(pid)) {
      if (!names.count(n)) continue;
      std::string comm;
      std::ifstream(std::string("/proc/") + e->d_name + "/comm") >> comm;
      found.push_back("pid " + std::to_string(pid) + " (" + comm + "): " + n);
    }
  }
  closedir(proc);
  return found;
}

/// Lives in memory shared before the fork: the memfds the job's processes have seen.
struct MemfdLedger {
  static constexpr int kMax = 4096;
  std::atomic<int> count{0};
  char names[kMax][kMemfdNameLen + 1];

  /// Records what the calling process maps or holds now (call it while the memory is in use).
  void recordSelf() {
    for (const std::string& n : memfdsOf(getpid())) {
      const int i = count.fetch_add(1);
      if (i >= kMax) return;
      std::memcpy(names[i], n.c_str(), kMemfdNameLen + 1);
    }
  }
  std::set<std::string> all() const {
    std::set<std::string> out;
    for (int i = 0; i < std::min(count.load(), kMax); ++i) out.insert(names[i]);
    return out;
  }
};

/// The ledger of the forked rank this process is (null in the test process): tests' rank bodies
/// record their own nlcclMemAlloc buffers through it.
inline MemfdLedger*& currentLedger() {
  static MemfdLedger* ledger = nullptr;
  return ledger;
}
inline void recordMemfds() {
  if (MemfdLedger* l = currentLedger()) l->recordSelf();
}

}  // namespace nlccl::testing

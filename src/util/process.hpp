// Whether another process of this host is still alive: the shm and neuronlink transports use it
// to turn a dead peer into an error instead of a wait.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace nlccl {

/// Reads a process's state letter and start time (clock ticks since boot) from /proc/<pid>/stat.
bool readProcStat(pid_t pid, char* state, uint64_t* startTime);
/// True when `pid` is gone, a zombie, or now names another process (start time differs; 0 skips
/// that check).
bool processDead(pid_t pid, uint64_t startTime);

}  // namespace nlccl

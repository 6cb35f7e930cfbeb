// Helpers shared by the shm transport's source files.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace nlccl::transport::shm {

/// Reads a process's state letter and start time (clock ticks since boot) from /proc/<pid>/stat.
bool readProcStat(pid_t pid, char* state, uint64_t* startTime);
/// True when `pid` is gone, a zombie, or now names another process (start time differs).
bool processDead(pid_t pid, uint64_t startTime);

}  // namespace nlccl::transport::shm

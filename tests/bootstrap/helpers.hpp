// Shared helpers for the bootstrap tests: ranks as threads, polling with a deadline.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "util/log.hpp"

namespace nlccl::bootstrap::test {

/// What one rank thread ended with.
struct RankOutcome {
  Status status = Status::InternalError;
  std::string error;  // log::lastError() of the rank's thread
};

/// Runs `ranks` (world ranks among `nranks`) as threads: init, then `body`, then destroy.
inline std::vector<RankOutcome> runRanks(const UniqueId& id, int nranks, std::vector<int> ranks,
                                         std::chrono::milliseconds timeout,
                                         std::function<Status(Bootstrap&)> body) {
  std::vector<RankOutcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      log::clearLastError();
      std::unique_ptr<Bootstrap> b;
      Status s = Bootstrap::init(id, ranks[i], nranks, timeout, &b);
      if (s == Status::Success && body) s = body(*b);
      out[i].status = s;
      out[i].error = log::lastError();
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

inline std::vector<int> allRanks(int n) {
  std::vector<int> r(n);
  for (int i = 0; i < n; ++i) r[i] = i;
  return r;
}

/// Polls `cond` every few ms until it holds or `limit` passes.
inline bool waitFor(const std::function<bool()>& cond,
                    std::chrono::milliseconds limit = std::chrono::seconds(10)) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return cond();
}

/// True once the root behind `id` has exited (its listener closed).
inline bool rootFinished(const UniqueId& id) {
  return waitFor([&] {
    RootStats s;
    return !rootStats(id, &s) || !s.running;
  });
}

/// Number of sockets this process holds open (to check that nothing is left behind).
inline int openSockets() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) {
    char link[64], target[128];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, target, sizeof(target) - 1);
    if (len > 0 && std::string(target, len).rfind("socket:", 0) == 0) ++n;
  }
  return n;
}

}  // namespace nlccl::bootstrap::test

// NLCCL_TRACE_FILE: a 4-rank all-reduce, as threads and as processes, writes one Chrome trace per
// rank that parses as JSON, has exactly one collective span per rank (with algorithm, bytes and
// peers), step spans with peer and bytes, and timestamps that line up across the ranks of the
// host (the four spans of one all-reduce overlap).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/threads.hpp"
#include "multirank/fork_ranks.hpp"
#include "nlccl.h"

#include "util/params.hpp"

namespace nlccl::testing {
namespace {

namespace fs = std::filesystem;

/// A fresh directory and NLCCL_TRACE_FILE pointing into it, for the scope.
struct TraceDir {
  fs::path dir;
  TraceDir() {
    dir = fs::temp_directory_path() / ("nlccl-trace-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    setenv("NLCCL_TRACE_FILE", (dir / "trace.%p.%r.json").c_str(), 1);
    // The checks count a ring all-reduce's steps: name it (auto picks another at these sizes).
    setenv("NLCCL_ALGO", "allreduce:ring", 1);
    resetParams();
    nlcclResetDebugInit();  // rereads NLCCL_TRACE_FILE
  }
  ~TraceDir() {
    unsetenv("NLCCL_ALGO");
    resetParams();
    unsetenv("NLCCL_TRACE_FILE");
    nlcclResetDebugInit();
    fs::remove_all(dir);
  }
  std::vector<nlohmann::json> read() const {
    std::vector<nlohmann::json> docs;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::ifstream in(e.path());
      docs.push_back(nlohmann::json::parse(in));  // throws (fails the test) if not JSON
    }
    return docs;
  }
};

/// Checks the per-rank documents of one 4-rank all-reduce.
void checkTraces(const std::vector<nlohmann::json>& docs, int p) {
  ASSERT_EQ(static_cast<int>(docs.size()), p) << "one file per rank";
  std::vector<int> ranks;
  double latestStart = 0, earliestEnd = 1e300;
  for (const auto& d : docs) {
    ASSERT_TRUE(d.contains("traceEvents"));
    int collectives = 0, steps = 0;
    for (const auto& e : d["traceEvents"]) {
      if (e["ph"] != "X") continue;
      if (e["cat"] == "collective") {
        ++collectives;
        EXPECT_EQ(e["name"], "allreduce");
        EXPECT_EQ(e["args"]["algorithm"], "ring");
        EXPECT_EQ(e["args"]["bytes"], 4 * 65536);
        EXPECT_EQ(e["args"]["peers"].size(), 2u);
        ranks.push_back(e["pid"]);
        const double ts = e["ts"], dur = e["dur"];
        latestStart = std::max(latestStart, ts);
        earliestEnd = std::min(earliestEnd, ts + dur);
      } else if (e["cat"] == "step") {
        ++steps;
        EXPECT_TRUE(e["args"].contains("peer"));
        EXPECT_GT(e["args"]["bytes"].get<int64_t>(), 0);
      }
    }
    EXPECT_EQ(collectives, 1) << "one collective span per rank";
    EXPECT_GE(steps, 2 * (p - 1)) << "a ring all-reduce has 2(p-1) steps";
  }
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));
  // One all-reduce: no rank can finish before every rank has started.
  EXPECT_LT(latestStart, earliestEnd) << "the ranks' spans do not line up in time";
}

void allReduce(nlcclComm_t comm) {
  std::vector<float> v(65536, 1.0f);
  ASSERT_EQ(nlcclAllReduce(v.data(), v.data(), v.size(), nlcclFloat, nlcclSum, comm, nullptr),
            nlcclSuccess);
  EXPECT_EQ(v[0], 4.0f);
}

TEST(Trace, FourThreadRanksAllReduce) {
  TraceDir trace;
  const int p = 4;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess);
  runRanks(p, [&](int r) { allReduce(comms[r]); });
  for (auto c : comms) ASSERT_EQ(nlcclCommDestroy(c), nlcclSuccess);  // destroy flushes
  checkTraces(trace.read(), p);
}

TEST(Trace, FourProcessRanksAllReduceLineUp) {
  TraceDir trace;
  auto status = forkRanks(4, [](int, nlcclComm_t comm) {
    std::vector<float> v(65536, 1.0f);
    return nlcclAllReduce(v.data(), v.data(), v.size(), nlcclFloat, nlcclSum, comm, nullptr) ==
               nlcclSuccess &&
           v[0] == 4.0f;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  checkTraces(trace.read(), 4);
}

TEST(Trace, OffWritesNothing) {
  TraceDir trace;
  unsetenv("NLCCL_TRACE_FILE");
  nlcclResetDebugInit();
  std::vector<nlcclComm_t> comms(2);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess);
  runRanks(2, [&](int r) {
    int v = 1;
    nlcclAllReduce(&v, &v, 1, nlcclInt, nlcclSum, comms[r], nullptr);
  });
  for (auto c : comms) nlcclCommDestroy(c);
  EXPECT_TRUE(trace.read().empty());
}

}  // namespace
}  // namespace nlccl::testing

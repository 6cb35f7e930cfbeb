// The simulated NeuronLink transport: modelled time of a message and of collectives
// against the fabric model and the simulator, real-time delay, and bit-equal results with shm.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <thread>

#include "algorithms/algorithms.hpp"
#include "common/threads.hpp"
#include "multirank/fork_ranks.hpp"
#include "nlccl.h"
#include "sim/simulate.hpp"
#include "nlccl/topology.hpp"

namespace nlccl::testing {
namespace {

/// Sets NLCCL_* variables for the life of a test.
class Env {
 public:
  Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [k, v] : vars) {
      names_.push_back(k);
      setenv(k, v, 1);
    }
  }
  ~Env() {
    for (const char* k : names_) unsetenv(k);
  }

 private:
  std::vector<const char*> names_;
};

/// Idle grace for the tests that compare modelled times exactly: a rank whose thread or process
/// starts later than twenty graces (busy CI, sanitizers) would be released and then start late.
constexpr const char* kExactGraceMs = "250";

nlcclCommStats_t statsOf(nlcclComm_t comm) {
  nlcclCommStats_t st;
  st.size = sizeof(st);
  EXPECT_EQ(nlcclCommGetStats(comm, &st), nlcclSuccess);
  return st;
}

TEST(NeuronLinkTest, EightByteSendRecvTakesTheLatency) {
  Env env({{"NLCCL_TRANSPORT", "neuronlink"}});
  std::vector<nlcclComm_t> comms(2);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess) << nlcclGetLastError(nullptr);
  // Wall time from just before the send is posted to the receive's completion: real-time mode
  // must not deliver before the modelled arrival (measuring from the receiver's own start would
  // depend on which thread starts first).
  std::atomic<int64_t> sentAtNs{0};
  double wallUs = 0;
  runRanks(2, [&](int r) {
    double v = 42;
    auto nowNs = [] {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(
                 std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
    if (r == 0) {
      sentAtNs.store(nowNs());
      ASSERT_EQ(nlcclSend(&v, 1, nlcclDouble, 1, comms[0], nullptr), nlcclSuccess);
    } else {
      v = 0;
      ASSERT_EQ(nlcclRecv(&v, 1, nlcclDouble, 0, comms[1], nullptr), nlcclSuccess);
      wallUs = static_cast<double>(nowNs() - sentAtNs.load()) / 1e3;
      EXPECT_EQ(v, 42);
    }
  });
  // trn3-us144: 10 us between any two chips, plus 8 B at 1.28 TB/s.
  fabric::Topology topo;
  std::string err;
  ASSERT_EQ(fabric::Topology::load("trn3-us144", {}, &topo, &err), Status::Success) << err;
  fabric::Route route = topo.route(0, 1);
  const double want = (route.latencyS + 8.0 / route.bottleneckBps) * 1e6;
  EXPECT_NEAR(route.latencyS * 1e6, 10.0, 1e-9);
  for (int r = 0; r < 2; ++r) {
    EXPECT_DOUBLE_EQ(statsOf(comms[r]).clockUs, want) << "rank " << r;
    EXPECT_STREQ(statsOf(comms[r]).transport, "neuronlink");
  }
  EXPECT_GE(wallUs, 10.0) << "real-time mode delivers no earlier than the modelled arrival";
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

TEST(NeuronLinkTest, LatencyIsAParameter) {
  Env env({{"NLCCL_TRANSPORT", "neuronlink"}, {"NLCCL_NEURONLINK_LATENCY_US", "3.5"},
           {"NLCCL_NEURONLINK_REALTIME", "0"}});
  std::vector<nlcclComm_t> comms(2);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess) << nlcclGetLastError(nullptr);
  runRanks(2, [&](int r) {
    char b = 1;
    if (r == 0) ASSERT_EQ(nlcclSend(&b, 0, nlcclChar, 1, comms[0], nullptr), nlcclSuccess);
    else ASSERT_EQ(nlcclRecv(&b, 0, nlcclChar, 0, comms[1], nullptr), nlcclSuccess);
  });
  EXPECT_DOUBLE_EQ(statsOf(comms[1]).clockUs, 3.5);
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

TEST(NeuronLinkTest, RanksMapToTheListedChips) {
  // On trn3-us144-pcie the server and rack levels differ in bandwidth, so a 1 MiB message from
  // chip 0 costs differently to chip 1 (same server) and to chip 4 (next server).
  fabric::Topology topo;
  std::string err;
  ASSERT_EQ(fabric::Topology::load("trn3-us144-pcie", {}, &topo, &err), Status::Success) << err;
  std::vector<double> seen;
  for (const char* chips : {"0,1", "0,4"}) {
    Env env({{"NLCCL_TRANSPORT", "neuronlink"}, {"NLCCL_TOPOLOGY", "trn3-us144-pcie"},
             {"NLCCL_NEURONLINK_CHIPS", chips}, {"NLCCL_NEURONLINK_REALTIME", "0"}});
    std::vector<nlcclComm_t> comms(2);
    ASSERT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclSuccess) << nlcclGetLastError(nullptr);
    const size_t bytes = 1 << 20;
    runRanks(2, [&](int r) {
      std::vector<char> b(bytes);
      if (r == 0) ASSERT_EQ(nlcclSend(b.data(), bytes, nlcclChar, 1, comms[0], nullptr), nlcclSuccess);
      else ASSERT_EQ(nlcclRecv(b.data(), bytes, nlcclChar, 0, comms[1], nullptr), nlcclSuccess);
    });
    fabric::Route route = topo.route(0, chips[2] - '0');
    const double want = (route.latencyS + bytes / std::min(route.bottleneckBps, topo.chip().dmaBps())) * 1e6;
    EXPECT_DOUBLE_EQ(statsOf(comms[1]).clockUs, want) << "chips " << chips;
    seen.push_back(want);
    for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
  }
  EXPECT_NE(seen[0], seen[1]) << "the two placements must cost differently for the test to mean much";
  Env bad({{"NLCCL_TRANSPORT", "neuronlink"}, {"NLCCL_NEURONLINK_CHIPS", "0,1,2"}});
  std::vector<nlcclComm_t> comms(2);
  EXPECT_EQ(nlcclCommInitAll(comms.data(), 2, nullptr), nlcclInvalidArgument);
  EXPECT_NE(std::string(nlcclGetLastError(nullptr)).find("NLCCL_NEURONLINK_CHIPS"), std::string::npos)
      << nlcclGetLastError(nullptr);
}

/// The simulator's flow-mode time for `req` built with `algorithm` on `topo` (slices of 1 MiB, as
/// the tests set NLCCL_SLICE_BYTES).
double simulatedUs(const fabric::Topology& topo, const plan::Request& req, const char* algorithm,
                   sim::Mode mode = sim::Mode::Flow) {
  std::string err;
  auto plan = algo::build(req, algorithm, &err);
  EXPECT_TRUE(plan) << err;
  if (!plan) return 0;
  sim::Options opts;
  opts.mode = mode;
  opts.chunkBytes = 1048576;
  sim::Result res;
  EXPECT_EQ(sim::simulate(topo, *plan, opts, &res, &err), Status::Success) << err;
  // The transport buffers without bound: the cases compared here must not engage the
  // simulator's receive window (docs/fabric.md), or the comparison would not be like for like.
  sim::Options eager = opts;
  eager.pairWindowBytes = fabric::kInfinite;
  sim::Result unbounded;
  EXPECT_EQ(sim::simulate(topo, *plan, eager, &unbounded, &err), Status::Success) << err;
  EXPECT_NEAR(unbounded.timeS, res.timeS, res.timeS * 1e-12) << "the receive window engaged";
  return res.timeS * 1e6;
}

/// All-to-all makes every chip send to every other at once: the messages share the senders' DMA
/// engines and links (with two ranks per chip, also one chip's engines between two ranks; on the
/// trn2 torus, links of multi-hop routes). The transport's modelled time equals the simulator's
/// flow mode, which models that sharing, and is well above the analytical mode's, which does not.
TEST(NeuronLinkTest, ContendedAllToAllMatchesTheSimulator) {
  const int p = 8;
  const size_t perPeer = (2u << 20) / sizeof(float);  // 2 MiB to each peer
  struct Case {
    const char* topology;
    const char* chips;
  };
  for (Case cs : {Case{"trn3-us144", ""}, Case{"trn3-us144", "0,0,1,1,2,2,3,3"},
                  Case{"trn2-us64", ""}}) {
    const char* chips = cs.chips;
    Env env({{"NLCCL_TRANSPORT", "neuronlink"}, {"NLCCL_SLICE_BYTES", "1048576"},
             {"NLCCL_NEURONLINK_REALTIME", "0"}, {"NLCCL_NEURONLINK_CHIPS", chips},
             {"NLCCL_TOPOLOGY", cs.topology}, {"NLCCL_NEURONLINK_IDLE_MS", kExactGraceMs}});
    std::vector<nlcclComm_t> comms(p);
    ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess) << nlcclGetLastError(nullptr);
    double modelledUs = 0;
    std::mutex mu;
    runRanks(p, [&](int r) {
      std::vector<float> in(perPeer * p), out(perPeer * p);
      for (int d = 0; d < p; ++d) in[d * perPeer] = static_cast<float>(r * 100 + d);
      ASSERT_EQ(nlcclAlltoAll(in.data(), out.data(), perPeer, nlcclFloat, comms[r], nullptr),
                nlcclSuccess);
      for (int s = 0; s < p; ++s) EXPECT_EQ(out[s * perPeer], static_cast<float>(s * 100 + r));
      std::lock_guard<std::mutex> lock(mu);
      modelledUs = std::max(modelledUs, statsOf(comms[r]).lastModelledUs);
    });
    for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);

    fabric::Topology topo;
    std::string err;
    std::vector<std::string> sets;
    if (*chips) sets.push_back("ranks_per_chip=2");
    ASSERT_EQ(fabric::Topology::load(cs.topology, sets, &topo, &err), Status::Success) << err;
    plan::Request req;
    req.collective = Collective::AllToAll;
    req.nranks = p;
    req.count = perPeer;
    const double flowUs = simulatedUs(topo, req, "direct");
    const double aloneUs = simulatedUs(topo, req, "direct", sim::Mode::Analytical);
    std::printf("all-to-all, 8 ranks on %s, %s: transport %.3f us, simulator flow %.3f us, "
                "analytical (no sharing) %.3f us\n", cs.topology, *chips ? "4 chips" : "8 chips",
                modelledUs, flowUs, aloneUs);
    EXPECT_NEAR(modelledUs, flowUs, 0.01 * flowUs) << cs.topology << " chips '" << chips << "'";
    EXPECT_GT(modelledUs, 1.03 * aloneUs) << "the messages must contend for the test to mean much";
  }
}

/// Contention between processes: the same all-to-all over forked ranks (the timeline lives in a
/// memfd all of them map) gives the simulator's time too.
TEST(NeuronLinkTest, ContendedAllToAllOverProcessesMatchesTheSimulator) {
  const int p = 4;
  const size_t perPeer = (2u << 20) / sizeof(float);
  Env env({{"NLCCL_SLICE_BYTES", "1048576"}, {"NLCCL_NEURONLINK_REALTIME", "0"},
           {"NLCCL_NEURONLINK_IDLE_MS", kExactGraceMs}});
  void* shared = mmap(nullptr, sizeof(double) * p, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* modelled = static_cast<double*>(shared);
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  config.transport = "neuronlink";
  auto status = forkRanks(
      p,
      [&](int r, nlcclComm_t comm) {
        std::vector<float> in(perPeer * p, 1.0f + r), out(perPeer * p);
        if (nlcclAlltoAll(in.data(), out.data(), perPeer, nlcclFloat, comm, nullptr) != nlcclSuccess)
          return false;
        for (int s = 0; s < p; ++s)
          if (out[s * perPeer + perPeer - 1] != 1.0f + s) return false;
        nlcclCommStats_t st;
        st.size = sizeof(st);
        if (nlcclCommGetStats(comm, &st) != nlcclSuccess) return false;
        modelled[r] = st.lastModelledUs;
        return true;
      },
      120, &config);
  for (int r = 0; r < p; ++r) ASSERT_EQ(status[r], 0) << "rank " << r;
  double modelledUs = 0;
  for (int r = 0; r < p; ++r) modelledUs = std::max(modelledUs, modelled[r]);
  munmap(shared, sizeof(double) * p);
  fabric::Topology topo;
  std::string err;
  ASSERT_EQ(fabric::Topology::load("trn3-us144", {}, &topo, &err), Status::Success) << err;
  plan::Request req;
  req.collective = Collective::AllToAll;
  req.nranks = p;
  req.count = perPeer;
  const double flowUs = simulatedUs(topo, req, "direct");
  std::printf("all-to-all, 4 processes: transport %.3f us, simulator flow %.3f us\n", modelledUs, flowUs);
  EXPECT_NEAR(modelledUs, flowUs, 0.01 * flowUs);
  EXPECT_GT(modelledUs, 1.03 * simulatedUs(topo, req, "direct", sim::Mode::Analytical));
}

/// A rank that never sends holds the others' clock only for the startup grace; the two that talk
/// still get exact times, and a rank that pauses between collectives longer than the grace is
/// released and then catches up (its messages start where the others' clock got to).
TEST(NeuronLinkTest, IdleRanksAreReleased) {
  Env env({{"NLCCL_TRANSPORT", "neuronlink"}, {"NLCCL_NEURONLINK_REALTIME", "0"},
           {"NLCCL_NEURONLINK_IDLE_MS", "5"}});
  std::vector<nlcclComm_t> comms(3);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), 3, nullptr), nlcclSuccess) << nlcclGetLastError(nullptr);
  runRanks(3, [&](int r) {
    double v = 1;
    if (r == 0) {
      ASSERT_EQ(nlcclSend(&v, 1, nlcclDouble, 1, comms[0], nullptr), nlcclSuccess);
    } else if (r == 1) {
      ASSERT_EQ(nlcclRecv(&v, 1, nlcclDouble, 0, comms[1], nullptr), nlcclSuccess);
    }
  });
  fabric::Topology topo;
  std::string err;
  ASSERT_EQ(fabric::Topology::load("trn3-us144", {}, &topo, &err), Status::Success) << err;
  const fabric::Route route = topo.route(0, 1);
  EXPECT_DOUBLE_EQ(statsOf(comms[1]).clockUs, (route.latencyS + 8.0 / route.bottleneckBps) * 1e6);
  EXPECT_EQ(statsOf(comms[2]).clockUs, 0);

  // Rank 2 pauses 50 ms (ten graces) before each of two all-reduces.
  runRanks(3, [&](int r) {
    std::vector<float> x(1 << 16, 1.0f);
    for (int i = 0; i < 2; ++i) {
      if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ASSERT_EQ(nlcclAllReduce(x.data(), x.data(), x.size(), nlcclFloat, nlcclSum, comms[r], nullptr),
                nlcclSuccess);
    }
    EXPECT_EQ(x[0], 9.0f);
  });
  for (int r = 0; r < 3; ++r) EXPECT_GT(statsOf(comms[r]).lastModelledUs, 0) << "rank " << r;
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

/// Direct all-to-all-v runs as point-to-point messages; the communicator still reports it as the
/// last collective, with its modelled time and the bytes this rank sent.
TEST(NeuronLinkTest, DirectAllToAllvIsReportedInTheStats) {
  Env env({{"NLCCL_TRANSPORT", "neuronlink"}, {"NLCCL_NEURONLINK_REALTIME", "0"}});
  const int p = 3;
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess) << nlcclGetLastError(nullptr);
  runRanks(p, [&](int r) {
    // Rank r sends (r + 1) * 1000 floats to each peer.
    std::vector<size_t> sc(p), sd(p), rc(p), rd(p);
    for (int q = 0; q < p; ++q) {
      sc[q] = (r + 1) * 1000;
      sd[q] = q * sc[q];
      rc[q] = (q + 1) * 1000;
      rd[q] = q == 0 ? 0 : rd[q - 1] + rc[q - 1];
    }
    std::vector<float> in(sc[0] * p, 1.0f), out(rd[p - 1] + rc[p - 1]);
    ASSERT_EQ(nlcclAlltoAllv(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(),
                             nlcclFloat, comms[r], nullptr),
              nlcclSuccess);
    const nlcclCommStats_t st = statsOf(comms[r]);
    EXPECT_STREQ(st.lastAlgorithm, "direct");
    EXPECT_EQ(st.lastBytesSent, (r + 1) * 1000 * sizeof(float) * (p - 1)) << "rank " << r;
    EXPECT_GT(st.lastModelledUs, 10.0) << "at least one route latency";
  });
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

struct CollParam {
  const char* algorithm;
  int nranks;
  size_t bytes;
};

class NeuronLinkVsSimTest : public ::testing::TestWithParam<CollParam> {};

/// Ring and hierarchical all-reduce on 8 and 16 ranks on trn3-us144 chips: the transport's
/// modelled time equals the simulator's flow-mode prediction for the same Plan within 1%.
TEST_P(NeuronLinkVsSimTest, AllReduceMatchesTheSimulator) {
  const CollParam prm = GetParam();
  const int p = prm.nranks;
  const char* groups = p == 8 ? "4x2" : "4x4";  // 4 chips per server, then servers
  Env env({{"NLCCL_TRANSPORT", "neuronlink"}, {"NLCCL_ALGO", prm.algorithm},
           {"NLCCL_HIER_GROUPS", groups}, {"NLCCL_SLICE_BYTES", "1048576"},
           {"NLCCL_NEURONLINK_REALTIME", "0"}, {"NLCCL_NEURONLINK_IDLE_MS", kExactGraceMs}});
  std::vector<nlcclComm_t> comms(p);
  ASSERT_EQ(nlcclCommInitAll(comms.data(), p, nullptr), nlcclSuccess) << nlcclGetLastError(nullptr);
  const size_t count = prm.bytes / sizeof(float);
  double modelledUs = 0;
  std::mutex mu;
  runRanks(p, [&](int r) {
    std::vector<float> in(count, 1.0f + r), out(count);
    ASSERT_EQ(nlcclAllReduce(in.data(), out.data(), count, nlcclFloat, nlcclSum, comms[r], nullptr),
              nlcclSuccess);
    EXPECT_EQ(out[count - 1], p * (p + 1) / 2.0f);
    std::lock_guard<std::mutex> lock(mu);
    modelledUs = std::max(modelledUs, statsOf(comms[r]).lastModelledUs);
  });

  fabric::Topology topo;
  std::string err;
  ASSERT_EQ(fabric::Topology::load("trn3-us144", {}, &topo, &err), Status::Success) << err;
  plan::Request req;
  req.collective = Collective::AllReduce;
  req.nranks = p;
  req.count = count;
  if (std::string(prm.algorithm) == "hier") req.groups = p == 8 ? std::vector<int>{4, 2} : std::vector<int>{4, 4};
  const double simUs = simulatedUs(topo, req, prm.algorithm);
  std::printf("%s all-reduce, %d ranks, %zu B: transport %.3f us, simulator (flow) %.3f us\n",
              prm.algorithm, p, prm.bytes, modelledUs, simUs);
  EXPECT_NEAR(modelledUs, simUs, 0.01 * simUs)
      << prm.algorithm << " on " << p << " ranks, " << prm.bytes << " B: transport " << modelledUs
      << " us, simulator " << simUs << " us";
  for (auto c : comms) EXPECT_EQ(nlcclCommDestroy(c), nlcclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Trn3, NeuronLinkVsSimTest,
                         ::testing::Values(CollParam{"ring", 8, 4 << 20}, CollParam{"ring", 16, 16 << 20},
                                           CollParam{"hier", 8, 4 << 20},
                                           CollParam{"hier", 16, 16 << 20}),
                         [](const auto& info) {
                           return std::string(info.param.algorithm) + "_" +
                                  std::to_string(info.param.nranks) + "ranks";
                         });

/// The same all-reduce over neuronlink (on shm) and over plain shm gives bit-identical results.
TEST(NeuronLinkTest, ResultsAreBitwiseEqualToShm) {
  const int p = 3;
  const size_t count = 300001;
  const size_t bytes = count * sizeof(float) * p;
  void* shared = mmap(nullptr, 2 * bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  auto* results = static_cast<float*>(shared);
  for (int run = 0; run < 2; ++run) {
    nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
    config.transport = run == 0 ? "shm" : "neuronlink";
    // The same algorithm over both (auto would model two fabrics and may pick two algorithms).
    config.algorithm = "ring";
    auto status = forkRanks(
        p,
        [&](int r, nlcclComm_t comm) {
          std::vector<float> in(count);
          uint32_t x = 12345u + r;
          for (auto& v : in) {  // values whose sums round differently in different orders
            x = x * 1664525u + 1013904223u;
            v = static_cast<float>(x >> 8) / 3.0f;
          }
          float* out = results + (run * p + r) * count;
          if (nlcclAllReduce(in.data(), out, count, nlcclFloat, nlcclSum, comm, nullptr) !=
              nlcclSuccess)
            return false;
          nlcclCommStats_t st;
          st.size = sizeof(st);
          return nlcclCommGetStats(comm, &st) == nlcclSuccess &&
                 std::string(st.transport) == config.transport;
        },
        60, &config);
    for (int r = 0; r < p; ++r) ASSERT_EQ(status[r], 0) << config.transport << " rank " << r;
  }
  EXPECT_EQ(std::memcmp(results, results + p * count, p * count * sizeof(float)), 0);
  munmap(shared, 2 * bytes);
}

}  // namespace
}  // namespace nlccl::testing

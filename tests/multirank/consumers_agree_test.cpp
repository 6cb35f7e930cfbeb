// The three consumers of a compiled Plan agree on what it sends. For every registered (algorithm,
// collective), on several rank counts, cut into several pipelined loops: the messages and bytes
// each rank sends according to the compiled form equal what the engine posts over loopback
// (counted at the transport) and what the simulator puts on the fabric. A consumer that matched,
// sliced, looped or skipped empty slices by a rule of its own would differ here.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "engine/engine.hpp"
#include "nlccl/topology.hpp"
#include "plan/compiled.hpp"
#include "multirank/forwarding_transport.hpp"
#include "sim/simulate.hpp"
#include "transports/loopback/loopback.hpp"
#include "util/log.hpp"

namespace nlccl {
namespace {

/// Counts what the engine posts, then passes everything to the transport underneath.
class CountingTransport final : public testing::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  const char* name() const override { return "counting"; }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes,
                  transport::Request* req) override {
    ++messages;
    this->bytes += bytes;
    return ForwardingTransport::postSend(peer, tag, buf, bytes, req);
  }
  /// With `exchanging`, it offers exchange() (the two posts, then progress until both are done),
  /// as the shm transport does, and counts its calls.
  bool exchanges() const override { return exchanging; }
  Status exchange(int peer, uint64_t tag, const void* send, size_t sendBytes, bool sendReadOnly,
                  void* recv, size_t recvBytes, const transport::Reducer* reducer,
                  std::chrono::milliseconds timeout) override {
    ++exchangeCalls;
    transport::Request s, r;  // an absent half (null, 0) is done at once (transport.hpp)
    s.readOnlySource = sendReadOnly;
    if (send != nullptr || sendBytes != 0) NLCHECK(postSend(peer, tag, send, sendBytes, &s));
    else s.done.store(true);
    if (recv != nullptr || recvBytes != 0) NLCHECK(postRecv(peer, tag, recv, recvBytes, reducer, &r));
    else r.done.store(true);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!s.done.load() || !r.done.load()) {
      const uint32_t e = activityEpoch();
      NLCHECK(progress());
      if (s.done.load() && r.done.load()) break;
      if (std::chrono::steady_clock::now() > deadline) return Status::Timeout;
      waitActivity(e, std::chrono::milliseconds(10));
    }
    return s.status != Status::Success ? s.status : r.status;
  }
  bool exchanging = false;
  size_t messages = 0;
  size_t bytes = 0;
  size_t exchangeCalls = 0;
};

constexpr size_t kElem = 4;           // float32
constexpr size_t kSliceBytes = 12;    // a few elements per slice: many loops, some slices empty
constexpr int kEngineMaxLoops = 64;   // the engine's cap (engine.cpp), which the compiled form applies

plan::Request requestFor(Collective c, int p, size_t count) {
  plan::Request req;
  req.collective = c;
  req.nranks = p;
  req.count = count;
  req.root = p > 2 ? 1 : 0;
  if (p % 2 == 0 && p > 2) req.groups = {2, p / 2};
  if (c == Collective::AllToAllv) {
    req.matrix.resize(static_cast<size_t>(p) * p);
    for (int i = 0; i < p; ++i)
      for (int j = 0; j < p; ++j)  // skewed, with empty blocks
        req.matrix[static_cast<size_t>(i) * p + j] = (i * 7 + j * 3) % 5 == 0 ? 0 : (i + 2 * j) % 9 + 1;
  }
  return req;
}

struct Counts {
  std::vector<size_t> messages, bytes;
};

/// What the compiled form says rank r sends in `loops` loops: a message per non-empty slice.
Counts compiledCounts(const plan::CompiledPlan& cp, int loops) {
  Counts c{std::vector<size_t>(cp.nranks()), std::vector<size_t>(cp.nranks())};
  for (int m = 0; m < static_cast<int>(cp.messages().size()); ++m)
    for (int k = 0; k < loops; ++k) {
      const size_t n = plan::CompiledPlan::sliceSize(cp.count(m), static_cast<size_t>(k),
                                                     static_cast<size_t>(loops));
      if (n == 0) continue;
      ++c.messages[cp.sender(m)];
      c.bytes[cp.sender(m)] += n * kElem;
    }
  return c;
}

/// Runs every rank's job in one engine batch over loopback and counts at the transport.
Counts engineCounts(const std::shared_ptr<const plan::CompiledPlan>& cp, const plan::Request& req) {
  const int p = cp->nranks();
  auto fabric = std::make_shared<transport::LoopbackFabric>(p);
  std::vector<std::unique_ptr<CountingTransport>> tps;
  std::vector<std::vector<char>> in(p), out(p), scratch(p);
  std::vector<engine::CollJob> jobs(p);
  for (int r = 0; r < p; ++r) {
    tps.push_back(std::make_unique<CountingTransport>(
        std::make_unique<transport::LoopbackTransport>(fabric, r)));
    in[r].assign(plan::inputCount(req, r) * kElem + 1, 1);
    out[r].assign(plan::outputCount(req, r) * kElem + 1, 0);
    scratch[r].assign(cp->plan().scratchCount * kElem + 1, 0);
    engine::CollJob& j = jobs[r];
    j.plan = cp;
    j.rank = r;
    j.input = in[r].data();
    j.output = req.inPlace ? in[r].data() : out[r].data();
    j.scratch = scratch[r].data();
    j.dtype = DataType::Float32;
    j.transport = tps[r].get();
    j.sliceBytes = kSliceBytes;
  }
  std::vector<engine::P2PJob> none;
  EXPECT_EQ(engine::run(jobs, none, std::chrono::seconds(30)), Status::Success);
  Counts c{std::vector<size_t>(p), std::vector<size_t>(p)};
  for (int r = 0; r < p; ++r) {
    c.messages[r] = tps[r]->messages;
    c.bytes[r] = tps[r]->bytes;
  }
  return c;
}

/// Runs one job per rank twice with engine::Runner (the prepared path), each rank on its own
/// thread, over CountingTransports that offer exchange(); returns the outputs.
std::vector<std::vector<float>> runnerOutputs(const std::shared_ptr<const plan::CompiledPlan>& cp,
                                              const plan::Request& req,
                                              std::vector<std::unique_ptr<CountingTransport>>* tps) {
  const int p = cp->nranks();
  auto fabric = std::make_shared<transport::LoopbackFabric>(p);
  std::vector<std::vector<float>> in(p), out(p), scratch(p);
  std::vector<engine::CollJob> jobs(p);
  for (int r = 0; r < p; ++r) {
    tps->push_back(std::make_unique<CountingTransport>(
        std::make_unique<transport::LoopbackTransport>(fabric, r)));
    tps->back()->exchanging = true;
    in[r].assign(plan::inputCount(req, r), 0);
    for (size_t i = 0; i < in[r].size(); ++i) in[r][i] = static_cast<float>(r * 100 + i);
    out[r].assign(plan::outputCount(req, r), 0);
    scratch[r].assign(cp->plan().scratchCount + 1, 0);
    engine::CollJob& j = jobs[r];
    j.plan = cp;
    j.rank = r;
    j.input = in[r].data();
    j.output = out[r].data();
    j.scratch = scratch[r].data();
    j.dtype = DataType::Float32;
    j.transport = (*tps)[r].get();
  }
  std::vector<std::thread> threads;
  std::vector<Status> st(p, Status::InternalError);
  for (int r = 0; r < p; ++r)
    threads.emplace_back([&, r] {
      engine::Runner runner;
      st[r] = runner.run(jobs[r], std::chrono::milliseconds(30000));
      if (st[r] == Status::Success) st[r] = runner.run(jobs[r], std::chrono::milliseconds(30000));
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < p; ++r) EXPECT_EQ(st[r], Status::Success) << "rank " << r;
  return out;
}

// A Plan that is one step of one exchange (2-rank recursive doubling) goes to the transport's
// exchange() whole, once per run (the prepared second run included), and sends what the
// compiled form says; a Plan of more steps (ring) never does. Both compute the sum.
/// `name`'s Plan of `req`, compiled; nullptr (and a test failure) when either step fails.
std::shared_ptr<const plan::CompiledPlan> compiledPlan(const plan::Request& req,
                                                       const char* name) {
  std::string err;
  auto built = algo::build(req, name, &err);
  if (!built) {
    ADD_FAILURE() << name << ": " << err;
    return nullptr;
  }
  std::shared_ptr<const plan::CompiledPlan> cp;
  if (plan::compile(std::move(*built), &cp, &err) != Status::Success) {
    ADD_FAILURE() << name << ": " << err;
    return nullptr;
  }
  return cp;
}

TEST(ConsumersAgree, OneExchangeStepsGoToTheTransportWhole) {
  for (const char* name : {"rd", "ring"}) {
    plan::Request req = requestFor(Collective::AllReduce, 2, 37);
    const auto cp = compiledPlan(req, name);
    ASSERT_TRUE(cp);
    const Counts want = compiledCounts(*cp, 1);
    std::vector<std::unique_ptr<CountingTransport>> tps;
    const auto out = runnerOutputs(cp, req, &tps);
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(tps[r]->exchangeCalls, std::string(name) == "rd" ? 2u : 0u) << name << " rank " << r;
      EXPECT_EQ(tps[r]->messages, 2 * want.messages[r]) << name << " rank " << r;
      for (size_t i = 0; i < out[r].size(); ++i)
        ASSERT_EQ(out[r][i], static_cast<float>(100 + 2 * i)) << name << " rank " << r << " " << i;
    }
  }
}

// A 2-rank all-to-all is one exchange beside a step that only copies the rank's own block (on a
// channel of its own): the copy runs, then the exchange goes to the transport whole.
TEST(ConsumersAgree, AnExchangeBesideLocalOnlyStepsGoesToTheTransportWhole) {
  const size_t count = 37;
  plan::Request req = requestFor(Collective::AllToAll, 2, count);
  const auto cp = compiledPlan(req, "direct");
  ASSERT_TRUE(cp);
  ASSERT_GT(cp->rankSteps(0).second - cp->rankSteps(0).first, 1);  // the copy's step and more
  std::vector<std::unique_ptr<CountingTransport>> tps;
  const auto out = runnerOutputs(cp, req, &tps);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(tps[r]->exchangeCalls, 2u) << "rank " << r;
    for (int j = 0; j < 2; ++j)  // block j of rank r's output: rank j's block r
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(out[r][j * count + i], static_cast<float>(j * 100 + r * count + i))
            << "rank " << r << " block " << j << " " << i;
  }
}

// A 2-rank broadcast is one transfer a rank (the root sends, the other receives), beside the
// root's copy of its input: each goes to exchange() with the other half absent.
TEST(ConsumersAgree, AStepOfOneTransferGoesToTheTransportWhole) {
  const size_t count = 37;
  plan::Request req = requestFor(Collective::Broadcast, 2, count);
  const auto cp = compiledPlan(req, "ring");
  ASSERT_TRUE(cp);
  std::vector<std::unique_ptr<CountingTransport>> tps;
  const auto out = runnerOutputs(cp, req, &tps);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(tps[r]->exchangeCalls, 2u) << "rank " << r;
    EXPECT_EQ(tps[r]->messages, r == req.root ? 2u : 0u) << "rank " << r;
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(out[r][i], static_cast<float>(req.root * 100 + i)) << "rank " << r << " " << i;
  }
}

TEST(ConsumersAgree, CompiledFormEngineAndSimulatorSendTheSame) {
  int cases = 0;
  for (const algo::Entry& e : algo::registry()) {
    for (int p : {2, 3, 4, 5, 8}) {
      plan::Request req = requestFor(e.collective, p, 37);
      std::string err;
      auto built = algo::build(req, e.name, &err);
      ASSERT_TRUE(built) << err;
      std::shared_ptr<const plan::CompiledPlan> cp;
      ASSERT_EQ(plan::compile(std::move(*built), &cp, &err), Status::Success) << err;
      const int loops = cp->loops(kSliceBytes, kElem, kEngineMaxLoops);
      const std::string what = std::string(e.name) + " " + collectiveName(e.collective) + " p=" +
                               std::to_string(p) + " loops=" + std::to_string(loops);
      const Counts want = compiledCounts(*cp, loops);

      const Counts engine = engineCounts(cp, req);
      EXPECT_EQ(engine.messages, want.messages) << what << ": engine messages per rank";
      EXPECT_EQ(engine.bytes, want.bytes) << what << ": engine bytes per rank";

      fabric::Topology topo;
      ASSERT_EQ(fabric::Topology::load("flat:" + std::to_string(p), {}, &topo, &err),
                Status::Success) << err;
      sim::Options opts;
      opts.chunkBytes = static_cast<int64_t>(kSliceBytes);
      opts.maxLoops = kEngineMaxLoops;
      sim::Result res;
      ASSERT_EQ(sim::simulate(topo, *cp, opts, &res, &err), Status::Success) << what << err;
      EXPECT_EQ(res.loops, loops) << what;
      size_t total = 0;
      for (int r = 0; r < p; ++r) {
        total += want.messages[r];
        EXPECT_EQ(res.rankBytesSent[r], static_cast<double>(want.bytes[r])) << what << " rank " << r;
      }
      EXPECT_EQ(res.transfers, total) << what << ": simulated transfers";
      ++cases;
    }
  }
  EXPECT_GE(cases, 5 * 15);  // every (algorithm, collective) of the registry, five rank counts
}

}  // namespace
}  // namespace nlccl

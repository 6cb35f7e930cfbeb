// The three consumers of a compiled Plan agree on what it sends. For every registered (algorithm,
// collective), on several rank counts, cut into several pipelined loops: the messages and bytes
// each rank sends according to the compiled form equal what the engine posts over loopback
// (counted at the transport) and what the simulator puts on the fabric. A consumer that matched,
// sliced, looped or skipped empty slices by a rule of its own would differ here.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "engine/engine.hpp"
#include "nlccl/topology.hpp"
#include "plan/compiled.hpp"
#include "sim/simulate.hpp"
#include "transports/loopback/loopback.hpp"

namespace nlccl {
namespace {

/// Counts what the engine posts, then passes everything to the transport underneath.
class CountingTransport final : public transport::Transport {
 public:
  explicit CountingTransport(std::unique_ptr<transport::Transport> inner)
      : inner_(std::move(inner)) {}
  const char* name() const override { return "counting"; }
  int rank() const override { return inner_->rank(); }
  int nranks() const override { return inner_->nranks(); }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes,
                  transport::Request* req) override {
    ++messages;
    this->bytes += bytes;
    return inner_->postSend(peer, tag, buf, bytes, req);
  }
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes,
                  const transport::Reducer* reducer, transport::Request* req) override {
    return inner_->postRecv(peer, tag, buf, bytes, reducer, req);
  }
  Status progress() override { return inner_->progress(); }
  uint32_t activityEpoch() override { return inner_->activityEpoch(); }
  const void* activityDomain() const override { return inner_->activityDomain(); }
  void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) override {
    inner_->waitActivity(seen, timeout);
  }
  void abort(Status why) override { inner_->abort(why); }
  void wake(int r) override { inner_->wake(r); }

  size_t messages = 0;
  size_t bytes = 0;

 private:
  std::unique_ptr<transport::Transport> inner_;
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

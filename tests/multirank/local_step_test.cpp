// A step of local ops alone runs one loop per engine pass, beside the transfer steps: a
// broadcast root that copies its input to its output (out of place) posts the next slice for its
// peer while that copy is under way, instead of copying everything first and leaving the peer
// waiting for the second slice until the whole copy is done.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/algorithms.hpp"
#include "engine/engine.hpp"
#include "multirank/forwarding_transport.hpp"
#include "plan/compiled.hpp"
#include "transports/loopback/loopback.hpp"

namespace nlccl {
namespace {

/// Records, at each send, how many elements of `watched` already hold what `want` holds.
class WatchingTransport final : public testing::ForwardingTransport {
 public:
  WatchingTransport(std::unique_ptr<transport::Transport> inner, const std::vector<float>* want,
                    const std::vector<float>* watched)
      : ForwardingTransport(std::move(inner)), want_(want), watched_(watched) {}
  const char* name() const override { return "watching"; }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes,
                  transport::Request* req) override {
    size_t copied = 0;
    for (size_t i = 0; i < want_->size(); ++i) copied += (*watched_)[i] == (*want_)[i];
    copiedAtSend.push_back(copied);
    return ForwardingTransport::postSend(peer, tag, buf, bytes, req);
  }

  std::vector<size_t> copiedAtSend;

 private:
  const std::vector<float>* want_;
  const std::vector<float>* watched_;
};

TEST(LocalSteps, ABroadcastRootSendsItsNextSliceBeforeItsOwnCopyIsDone) {
  constexpr int kLoops = 8;
  constexpr size_t kCount = 1024;
  plan::Request req;
  req.collective = Collective::Broadcast;
  req.nranks = 2;
  req.count = kCount;
  req.root = 0;
  std::string err;
  auto built = algo::build(req, "ring", &err);
  ASSERT_TRUE(built.has_value()) << err;
  std::shared_ptr<const plan::CompiledPlan> cp;
  ASSERT_EQ(plan::compile(std::move(*built), &cp, &err), Status::Success) << err;

  auto fabric = std::make_shared<transport::LoopbackFabric>(2);
  std::vector<std::vector<float>> in(2, std::vector<float>(kCount, 0.0f)),
      out(2, std::vector<float>(kCount, -1.0f));
  for (size_t i = 0; i < kCount; ++i) in[0][i] = static_cast<float>(i + 1);
  auto root = std::make_unique<WatchingTransport>(
      std::make_unique<transport::LoopbackTransport>(fabric, 0), &in[0], &out[0]);
  auto other = std::make_unique<transport::LoopbackTransport>(fabric, 1);
  std::vector<engine::CollJob> jobs(2);
  for (int r = 0; r < 2; ++r) {
    engine::CollJob& j = jobs[r];
    j.plan = cp;
    j.rank = r;
    j.input = in[r].data();
    j.output = out[r].data();
    j.dtype = DataType::Float32;
    j.transport = r == 0 ? static_cast<transport::Transport*>(root.get()) : other.get();
    j.sliceBytes = kCount * sizeof(float) / kLoops;
  }
  std::vector<engine::P2PJob> none;
  ASSERT_EQ(engine::run(jobs, none, std::chrono::seconds(30)), Status::Success);
  for (int r = 0; r < 2; ++r) ASSERT_EQ(out[r], in[0]) << "rank " << r;

  ASSERT_EQ(root->copiedAtSend.size(), static_cast<size_t>(kLoops));
  // The second slice is posted once the first has gone: by then the root has copied at most a
  // slice or two of its own output, not all of it.
  EXPECT_LE(root->copiedAtSend[1], 2 * kCount / kLoops)
      << "the root copied " << root->copiedAtSend[1] << " of " << kCount
      << " elements before it posted the second slice";
}

}  // namespace
}  // namespace nlccl

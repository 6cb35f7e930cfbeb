// Virtual time of one rank's step instances, kept only when the transport models time
// (transports/time_model.hpp). A step instance starts when its predecessors under the pipelining
// rule have completed (or at the job's start) and completes when its last message does, plus the
// modelled time of its local ops: the simulator's timing, so the two agree.
#pragma once

#include <algorithm>
#include <vector>

#include "plan/compiled.hpp"

namespace nlccl::engine {

class StepClock {
 public:
  StepClock(const plan::CompiledPlan& cp, int rank, int loops, double start)
      : cp_(cp), first_(cp.rankSteps(rank).first), loops_(loops), start_(start), end_(start) {
    const auto [a, b] = cp.rankSteps(rank);
    done_.assign(static_cast<size_t>(b - a) * static_cast<size_t>(loops), start);
  }
  /// When loop k of step s may start.
  double startOf(int s, int k) const {
    double t = start_;
    std::pair<int, int> pred[2];
    for (int i = 0, n = cp_.predecessors(s, k, pred); i < n; ++i)
      t = std::max(t, at(pred[i].first, pred[i].second));
    return t;
  }
  void complete(int s, int k, double t) {
    done_[index(s, k)] = t;
    end_ = std::max(end_, t);
  }
  double end() const { return end_; }

 private:
  size_t index(int s, int k) const {
    return static_cast<size_t>(s - first_) * static_cast<size_t>(loops_) + static_cast<size_t>(k);
  }
  double at(int s, int k) const { return done_[index(s, k)]; }

  const plan::CompiledPlan& cp_;
  int first_;
  int loops_;
  double start_;
  double end_;
  std::vector<double> done_;
};

}  // namespace nlccl::engine

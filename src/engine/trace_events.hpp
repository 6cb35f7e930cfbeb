// The engine's events for traces of real runs (util/trace.hpp): a span per collective (algorithm,
// bytes, peers), per step instance (peers and bytes of its transfers), per wait for activity and
// per batch of point-to-point transfers; over a transport that models time, each step's modelled
// interval too. Called only when trace::enabled().
#pragma once

#include "engine/engine.hpp"

namespace nlccl::engine::trace_events {

/// Collective `job` ran from `startUs` to now (monotonic microseconds).
void collective(const CollJob& job, double startUs);
/// Loop `loop` of step `s` of `job` ran from `startUs` to now; with a time model, also from
/// `vstart` to `vend` modelled seconds.
void step(const CollJob& job, int s, int loop, int loops, double startUs, bool modelled,
          double vstart, double vend);
/// Rank `rank` waited for transport activity from `startUs` to now.
void wait(int rank, double startUs);
/// The point-to-point job ran from `startUs` to now.
void p2p(const P2PJob& job, double startUs);

}  // namespace nlccl::engine::trace_events

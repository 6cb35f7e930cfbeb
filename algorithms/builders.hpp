// Plan builders with explicit tuning parameters, for tests and the tuner. The registry entries
// (families.hpp) call them with the defaults.
#pragma once

#include "plan/plan.hpp"

namespace nlccl::algo {

/// Double binary tree all-reduce: tree t carries half t of the buffer on channel t, each pipelined
/// in `chunks` chunks (0: one; the compiled loops pipeline it).
plan::Plan treeAllReduce(const plan::Request& req, int chunks = 0);
/// Binomial-tree broadcast and reduce rooted at req.root.
plan::Plan binomialBroadcast(const plan::Request& req);
plan::Plan binomialReduce(const plan::Request& req);
/// Rabenseifner all-reduce and recursive-doubling (Bruck for non-powers of two) all-gather.
plan::Plan rabenseifnerAllReduce(const plan::Request& req);
plan::Plan doublingAllGather(const plan::Request& req);
/// Concurrent direct all-to-all(v): every peer at once, at most `window` transfers in flight per
/// rank (direct.cpp). The registry's "direct" uses kDirectWindow.
constexpr int kDirectWindow = 64;
plan::Plan concurrentAllToAll(const plan::Request& req, int window);
/// Bruck all-to-all.
plan::Plan bruckAllToAll(const plan::Request& req);
/// Hierarchical collectives over req.groups with req.levelAlgorithms.
plan::Plan hierAllReduce(const plan::Request& req);
plan::Plan hierAllGather(const plan::Request& req);
plan::Plan hierReduceScatter(const plan::Request& req);
plan::Plan hierAllToAll(const plan::Request& req);  ///< AllToAll and AllToAllv
plan::Plan hierBroadcast(const plan::Request& req);

}  // namespace nlccl::algo

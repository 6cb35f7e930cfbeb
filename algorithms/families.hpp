// Each algorithm family (one file each) lists the (name, collective, builder) entries it provides;
// registry.cpp concatenates them. Adding a family: declare it here and list it in registry.cpp.
#pragma once

#include <vector>

#include "algorithms/algorithms.hpp"

namespace nlccl::algo {

std::vector<Entry> ringEntries();     // ring.cpp: allreduce, allgather, reducescatter, broadcast, reduce
std::vector<Entry> directEntries();   // direct.cpp: alltoall, alltoallv (direct: concurrent; pairwise)
std::vector<Entry> treeEntries();     // tree.cpp: double binary tree allreduce; binomial bcast/reduce
std::vector<Entry> rhdEntries();      // rhd.cpp: Rabenseifner allreduce, recursive doubling allgather
std::vector<Entry> hierEntries();     // hier.cpp: hierarchical allreduce/allgather/reducescatter/alltoall(v)
std::vector<Entry> bruckEntries();    // bruck.cpp: Bruck alltoall
std::vector<Entry> recursiveDoublingEntries();  // recursive_doubling.cpp: rd allreduce (small messages)
std::vector<Entry> rootedEntries();   // rooted.cpp: direct gather and scatter

}  // namespace nlccl::algo
